"""Two loop edges where results have not arrived yet, or arrived PENDING.

- The cycle rule reads the window in the order the requests came, whether or not their
  results have arrived: A-B-A-B with no result reported is short_cycle at the fourth request.
- A request without `job_id` that repeats a call whose last result was PENDING (the agent
  restarts the job instead of polling it) draws on the poll budget.
"""

from __future__ import annotations

import pytest

from agents.guard.core import report_result, request_tool
from agents.guard.terms import BLOCK, EXECUTE, PARTIAL, PENDING, RUNNING, STOP, ToolResult

from .factories import NOW, agent, call_of, make_task, ok, read


def ask(task, req):
    return request_tool(task, req, None, agent(), NOW)


def pending(job_id="job-1"):
    return ToolResult(kind=PENDING, wait_ms=1000, job_id=job_id)


A, B, C = read(q="a"), read(q="b"), read(q="c")

# Requests in order, the results reported before each (None: none), and what the last
# request answers.
CYCLES = [
    pytest.param([A, B, A], [], B, "short_cycle", id="a-b-a-b, no result yet"),
    pytest.param([A, B, A], [A], B, "short_cycle", id="a-b-a-b, the first result only"),
    pytest.param([A, B, A], [A, B], B, "short_cycle", id="a-b-a-b, two results"),
    pytest.param([A, B, A], [A, B, A], B, "short_cycle", id="a-b-a-b, every result"),
    pytest.param([A, B, C, A, B], [], C, "short_cycle", id="a-b-c-a-b-c, no result yet"),
    pytest.param([A, B, C, A, B], [A, B], C, "short_cycle", id="a-b-c-a-b-c, two results"),
    pytest.param([A, B], [], A, None, id="a-b-a is not yet a cycle"),
    pytest.param([A, B, C, A], [], B, None, id="a-b-c-a-b is not yet a cycle"),
]


@pytest.mark.parametrize(("requests", "reported", "last", "reason"), CYCLES)
def test_the_cycle_rule_reads_requests_in_the_order_they_came(requests, reported, last, reason):
    task = make_task(max_same_call=5, max_cycle_period=3, max_stagnant=10)
    for req in requests:
        assert ask(task, req).decision == EXECUTE
    for req in reported:  # results, oldest request first (pending keeps request order)
        assert report_result(task, call_of(req), ok(), NOW).decision != STOP

    out = ask(task, last)

    if reason is None:
        assert out.decision == EXECUTE
    else:
        assert (out.decision, out.reason, task.state) == (STOP, reason, PARTIAL)


def test_a_b_a_b_without_results_stops_at_the_fourth_request_not_the_fifth():
    task = make_task()  # the defaults: max_same_call 2, max_cycle_period 3
    for req in (A, B, A):
        assert ask(task, req).decision == EXECUTE

    out = ask(task, B)

    assert (out.reason, task.tool_requests, task.tool_executions) == ("short_cycle", 4, 3)


def test_an_unreported_call_still_counts_as_a_repeat_of_itself():
    task = make_task()
    assert ask(task, A).decision == EXECUTE
    assert ask(task, A).decision == EXECUTE
    assert ask(task, A).decision == BLOCK  # same_call, before the cycle rule


# -- a job restarted instead of polled ---------------------------------------------------------


EXPORT = read("start_export", report="sales")


def restart(task, req=EXPORT, result=None):
    """Request `req`; when it executes, report `result` (PENDING by default)."""
    out = ask(task, req)
    if out.decision == EXECUTE:
        report_result(task, call_of(req), result or pending(), NOW)
    return out


def test_restarting_a_pending_job_draws_on_the_poll_budget():
    task = make_task(max_polls=2, max_tool_executions=20)
    assert restart(task).decision == EXECUTE  # the job starts: not a poll
    assert task.polls == 0
    assert restart(task).decision == EXECUTE  # restarted: its last result was PENDING
    assert restart(task).decision == EXECUTE
    assert task.polls == 2

    out = restart(task)

    assert (out.decision, out.reason, task.state) == (STOP, "poll_budget", PARTIAL)
    assert (task.polls, task.tool_executions) == (2, 3)


def test_restarts_and_polls_share_one_budget():
    task = make_task(max_polls=2)
    poll = read("export_status", job_id="job-1", job="job-1")
    assert restart(task).decision == EXECUTE
    assert restart(task, poll).decision == EXECUTE
    assert restart(task).decision == EXECUTE
    assert task.polls == 2

    assert restart(task, poll).reason == "poll_budget"


def test_a_finished_job_may_start_again_without_drawing_on_the_poll_budget():
    task = make_task(max_polls=1, max_same_call=5)
    assert restart(task).decision == EXECUTE
    assert restart(task, result=ok(evidence={"revision": 1, "done": False})).decision == EXECUTE
    assert task.polls == 1  # the restart of the PENDING job

    assert restart(task).decision == EXECUTE  # its last result was SUCCESS: a new job
    assert (task.polls, task.state) == (1, RUNNING)


def test_another_call_is_not_a_restart_of_a_pending_job():
    task = make_task(max_polls=1)
    assert restart(task).decision == EXECUTE
    other = read("start_export", report="costs")
    assert restart(task, other).decision == EXECUTE
    assert task.polls == 0


def test_a_restart_past_the_poll_budget_executes_nothing():
    task = make_task(max_polls=0)
    assert restart(task).decision == EXECUTE
    out = restart(task)
    assert (out.reason, task.tool_executions, task.pending) == ("poll_budget", 1, [])
