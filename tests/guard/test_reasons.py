"""Every reason in REASON_CODES, produced by the core through its public functions.

Each row builds a running task, drives it into one reason, and checks the terminal state, the
reason, the upstream code and that the stopping call says `stopped_now`.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents.guard import core
from agents.guard.terms import (
    COMPLETED,
    FAILED,
    FATAL,
    IN_FLIGHT,
    NEEDS_HUMAN,
    NO_RESULT,
    OP_COMMITTED,
    PARTIAL,
    PRECONDITION,
    REASON_CODES,
    RETRYABLE,
    STOPPED,
    ModelCallRequest,
    OperationView,
    ToolResult,
    UsageReport,
)

from .factories import NOW, agent, call_of, ev, make_task, ok, read, step, write


def model(task, estimate="0", **agent_kw):
    req = ModelCallRequest(estimate_cost=Decimal(estimate))
    return core.gate_model_call(task, req, agent(**agent_kw), NOW)


def ask(task, req, operation=None):
    return core.request_tool(task, req, operation, agent(), NOW)


def result(task, req, res):
    return core.report_result(task, call_of(req), res, NOW)


def goal_met(task):
    return result(task, read(q="x"), ok(evidence=ev(1, done=True)))


def goal_unverified(task):
    return core.finish(task, None, NOW)


def deadline(task):
    task.deadline_at = NOW
    return ask(task, read(q="x"))


def invalid_wait(task):
    return result(task, read(q="x"), ToolResult(kind=RETRYABLE, wait_ms=0))


def model_budget(task):
    task.limits.max_model_calls = 1
    model(task)
    return model(task)


def request_budget(task):
    task.limits.max_tool_requests = 1
    step(task, read(q="a"))
    return ask(task, read(q="b"))


def execution_budget(task):
    task.limits.max_tool_executions = 1
    step(task, read(q="a"))
    return ask(task, read(q="b"))


def retry_budget(task):
    task.limits.max_retries = 0
    return result(task, read(q="x"), ToolResult(kind=RETRYABLE, wait_ms=10))


def poll_budget(task):
    task.limits.max_polls = 0
    return ask(task, read(tool="job_status", job_id="j", id="j"))


def token_budget(task):
    task.limits.max_tokens = 100
    model(task)
    core.settle_usage(task, UsageReport(Decimal("0"), Decimal("0"), 100, ""), NOW)
    return model(task)


def cost_budget(task):
    task.limits.max_cost = Decimal("1")
    return model(task, "1.01")


def spend_cap(task):
    return model(task, "1", daily_cap=Decimal("5"), spent_today=Decimal("4.5"))


def same_call(task):
    req = read(q="x")
    step(task, req), step(task, req), ask(task, req)
    return ask(task, req)


def short_cycle(task):
    task.limits.max_stagnant = 10
    a, b = read(q="a"), read(q="b")
    step(task, a), step(task, b), step(task, a)
    return ask(task, b)


def no_progress(task):
    step(task, read(q="a")), step(task, read(q="b"))
    return step(task, read(q="c"))[1]


def repeated_output(task):
    for _ in range(2):
        core.settle_usage(task, UsageReport(Decimal("0"), Decimal("0"), 1, "sig"), NOW)
    return core.settle_usage(task, UsageReport(Decimal("0"), Decimal("0"), 1, "sig"), NOW)


def near_duplicate(task):
    task.limits.near_duplicate_threshold = 0.8
    task.limits.repeat_action = "stop"
    step(task, read(q="weather in paris")), step(task, read(q="weather in paris"))
    return ask(task, read(q="weather in paris?"))


def missing_operation_key(task):
    return ask(task, write(key=None, to="a@b"))


def operation_conflict(task):
    row = OperationView(state=OP_COMMITTED, fingerprint="another call")
    return ask(task, write(to="a@b"), row)


def unknown_commit(task):
    req = write(to="a@b")
    row = OperationView(state=IN_FLIGHT, fingerprint=call_of(req).fingerprint, lease_live=False)
    return ask(task, req, row)


def bad_result(task):
    return result(task, read(q="x"), ToolResult(kind="WHATEVER"))


def invalid_evidence(task):
    return result(task, read(q="x"), ok(evidence={"revision": "one", "done": True}))


def executor_error(task):
    return result(task, read(q="x"), ToolResult(kind=NO_RESULT))


def fatal(task):
    return result(task, read(q="x"), ToolResult(kind=FATAL))


def precondition(task):
    return result(task, read(q="x"), ToolResult(kind=PRECONDITION))


def operator_stop(task):
    return core.stop(task, "operator_stop", NOW)


def agent_stop(task):
    return core.stop(task, "agent_stop", NOW)


def agent_paused(task):
    return model(task, paused=True)


TABLE = [
    (goal_met, COMPLETED),
    (goal_unverified, PARTIAL),
    (deadline, PARTIAL),
    (invalid_wait, FAILED),
    (model_budget, PARTIAL),
    (request_budget, PARTIAL),
    (execution_budget, PARTIAL),
    (retry_budget, PARTIAL),
    (poll_budget, PARTIAL),
    (token_budget, PARTIAL),
    (cost_budget, PARTIAL),
    (spend_cap, PARTIAL),
    (same_call, PARTIAL),
    (short_cycle, PARTIAL),
    (no_progress, PARTIAL),
    (repeated_output, PARTIAL),
    (near_duplicate, PARTIAL),
    (missing_operation_key, NEEDS_HUMAN),
    (operation_conflict, NEEDS_HUMAN),
    (unknown_commit, NEEDS_HUMAN),
    (bad_result, FAILED),
    (invalid_evidence, FAILED),
    (executor_error, FAILED),
    (fatal, FAILED),
    (precondition, NEEDS_HUMAN),
    (operator_stop, STOPPED),
    (agent_stop, STOPPED),
    (agent_paused, STOPPED),
]


def test_the_table_covers_every_reason_exactly_once():
    assert sorted(scenario.__name__ for scenario, _ in TABLE) == sorted(REASON_CODES)


@pytest.mark.parametrize(("scenario", "state"), TABLE, ids=[s.__name__ for s, _ in TABLE])
def test_the_core_stops_with_each_reason_its_state_and_its_code(scenario, state):
    task = make_task()
    reason = scenario.__name__
    out = scenario(task)
    assert (out.decision, out.reason, out.stopped_now) == ("STOP", reason, True)
    assert (task.state, task.reason) == (state, reason)
    report = core.build_report(task, NOW, [])
    assert report["code"] == REASON_CODES[reason]
    assert report["reason"] == reason


@pytest.mark.parametrize(("scenario", "state"), TABLE, ids=[s.__name__ for s, _ in TABLE])
def test_after_each_reason_the_task_answers_only_stop(scenario, state):
    task = make_task()
    scenario(task)
    assert model(task).decision == "STOP"
    assert ask(task, read(q="new")).decision == "STOP"
    assert core.finish(task, ev(99, done=True), NOW).stopped_now is False
    assert task.state == state
