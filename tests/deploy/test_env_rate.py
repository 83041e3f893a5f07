"""API_THROTTLE_RATE and friends are parsed strictly: a bad rate stops the start."""

from __future__ import annotations

import pytest

from loopwarden.env import ConfigError, env_rate


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("3000/min", "3000/minute"),
        ("50/s", "50/second"),
        (" 10/Hour ", "10/hour"),
        ("100000/day", "100000/day"),
        ("off", None),
        ("", "7/minute"),
    ],
)
def test_it_reads_a_rate(monkeypatch, raw, parsed):
    monkeypatch.setenv("API_THROTTLE_RATE", raw)
    assert env_rate("API_THROTTLE_RATE", "7/minute") == parsed


@pytest.mark.parametrize("raw", ["3000", "0/min", "-5/min", "10/fortnight", "ten/min", "10/"])
def test_it_refuses_anything_else(monkeypatch, raw):
    monkeypatch.setenv("API_THROTTLE_RATE", raw)
    with pytest.raises(ConfigError, match="API_THROTTLE_RATE=.* is not a rate"):
        env_rate("API_THROTTLE_RATE", "7/minute")
