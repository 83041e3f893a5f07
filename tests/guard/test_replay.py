"""The issue's replay table at the core level: recorded agent traces and what the guard does.

Each trace is a list of tool requests (with the result the tool would report if executed);
the expected column is the guard's decision for each request, then the final state.
"""

from __future__ import annotations

import pytest

from agents.guard.terms import BLOCK, COMPLETED, EXECUTE, PARTIAL, STOP

from .factories import ev, make_task, ok, read, step

SEARCH = read(q="invoice 42")
A, B = read(tool="get_order", id=1), read(tool="get_customer", id=7)


def pages():
    return [
        (read(tool="list", page=1), ok(evidence=ev(1))),
        (read(tool="list", page=2), ok(evidence=ev(2))),
        (read(tool="list", page=3), ok(evidence=ev(3, done=True))),
    ]


TRACES = [
    pytest.param(
        {},
        [(SEARCH, ok())] * 4,
        [EXECUTE, EXECUTE, BLOCK, STOP],
        (PARTIAL, "same_call", 2),
        id="the same read retried runs twice then is blocked then stops with same_call",
    ),
    pytest.param(
        {"max_stagnant": 5},
        [(A, ok()), (B, ok()), (A, ok()), (B, ok())],
        [EXECUTE, EXECUTE, EXECUTE, STOP],
        (PARTIAL, "short_cycle", 3),
        id="an A B alternation runs three times then stops with short_cycle",
    ),
    pytest.param(
        {},
        pages(),
        [EXECUTE, EXECUTE, EXECUTE],
        (COMPLETED, "goal_met", 3),
        id="three pages with rising revisions and done on the last complete the task",
    ),
    pytest.param(
        {},
        [(read(q=f"invoice {n}"), ok()) for n in range(5)],
        [EXECUTE, EXECUTE, EXECUTE],
        (PARTIAL, "no_progress", 3),
        id="changing args without progress stops with no_progress after three executions",
    ),
]


@pytest.mark.parametrize(("limits", "trace", "decisions", "final"), TRACES)
def test_replay(limits, trace, decisions, final):
    task = make_task(**limits)
    seen = []
    for req, res in trace:
        if task.terminal:
            break
        asked, _ = step(task, req, res)
        seen.append(asked.decision)
    assert seen == decisions
    assert (task.state, task.reason, task.tool_executions) == final


def test_the_completed_pages_trace_ends_at_revision_three():
    task = make_task()
    for req, res in pages():
        step(task, req, res)
    assert task.revision == 3
