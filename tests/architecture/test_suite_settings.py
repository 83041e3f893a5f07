"""Settings of the test suite itself."""

from __future__ import annotations

from hypothesis import settings


def test_property_tests_time_nothing():
    """Hypothesis fails an example slower than 200 ms by default: a timed assertion, which a
    loaded CI machine trips at random. Speed is shown by the benchmarks instead."""
    assert settings().deadline is None
    assert settings().print_blob  # a failure prints how to reproduce it
