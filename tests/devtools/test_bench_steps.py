"""The bench's trace-length comparison gives the long task and the fresh tasks the same kind
of step, so that its ratio measures the trace length and nothing else."""

from __future__ import annotations

import pytest

from devtools.management.commands.bench import trace_steps, writes_at


@pytest.mark.parametrize(("length", "samples"), [(5000, 100), (500, 10), (10, 40)])
def test_every_sample_takes_a_read_step_on_both_tasks(length, samples):
    steps = trace_steps(length, samples)

    assert len(steps) == samples
    assert [(writes_at(short), writes_at(long)) for short, long in steps] == [
        (False, False)
    ] * samples


@pytest.mark.parametrize("length", [5000, 500, 10])
def test_the_long_tasks_steps_come_after_its_prior_rows_each_once(length):
    long_steps = [long for _short, long in trace_steps(length, 100)]

    # grow_trace gives the task steps 1 .. length / 2 (a model call and a tool call each).
    assert min(long_steps) > length // 2
    assert long_steps == sorted(set(long_steps))


def test_a_fresh_tasks_step_is_the_one_after_its_ten_prior_rows():
    assert {short for short, _long in trace_steps(5000, 100)} == {6}
