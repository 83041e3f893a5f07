"""The repeated-output streak's restarts, released executions, the operator's grant bound and
the novelty hash (docs/DESIGN.md sections 4 and 6, issue 8)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents.guard import core
from agents.guard.fingerprint import canonical_json, sha256_hex
from agents.guard.terms import (
    CONTINUE,
    PENDING,
    STOP,
    Limits,
    ModelCallRequest,
    ToolResult,
    UsageReport,
)

from .factories import NOW, agent, call_of, ev, make_task, ok, read, step

D = Decimal

SIG = "same-plan"


def plan(task, signature=SIG):
    core.gate_model_call(task, ModelCallRequest(estimate_tokens=10), agent(), NOW)
    report = UsageReport(reserved_cost=D(0), actual_cost=D(0), tokens=10, signature=signature)
    return core.settle_usage(task, report, NOW)


def poll(task):
    req = read("poll", job_id="j9", job="j9")
    asked = core.request_tool(task, req, None, agent(), NOW)
    result = ToolResult(kind=PENDING, job_id="j9", wait_ms=10)
    return asked, core.report_result(task, call_of(req), result, NOW)


@pytest.mark.parametrize(
    ("between", "decision"),
    [
        ("nothing", STOP),  # three identical plans in a row
        ("poll", CONTINUE),  # a status poll between them: waiting, not looping
        ("progress", CONTINUE),  # verified progress between them: the next step
        ("read", STOP),  # a plain read without progress changes nothing
    ],
)
def test_the_repeated_output_streak_restarts_on_a_poll_and_on_progress(between, decision):
    task = make_task(max_stagnant=10)
    outs = []
    for n in range(1, 4):
        outs.append(plan(task))
        if task.terminal:
            break
        if between == "poll":
            poll(task)
        elif between == "progress":
            step(task, read("search", page=n), ok(evidence=ev(n)))
        elif between == "read":
            step(task, read("search", page=n), ok())
    assert outs[-1].decision == decision
    if decision == STOP:
        assert task.reason == "repeated_output"


def test_a_poll_stopped_by_its_budget_does_not_touch_the_streak():
    task = make_task(max_polls=0)
    task.signatures = [SIG, SIG]
    asked, _ = poll(task)
    assert asked.reason == "poll_budget" and task.signatures == [SIG, SIG]


@pytest.mark.parametrize(
    ("pending", "fp", "after"),
    [(["a", "b", "a"], "a", ["b", "a"]), (["b"], "a", ["b"]), ([], "a", [])],
)
def test_release_pending_removes_one_entry_of_the_execution(pending, fp, after):
    task = make_task()
    task.pending = list(pending)
    core.release_pending(task, fp)
    assert task.pending == after


def test_a_late_result_of_a_released_execution_leaves_the_pending_set_alone():
    task = make_task()
    req = read("search", q="x")
    core.request_tool(task, req, None, agent(), NOW)  # EXECUTE, pending
    core.release_pending(task, call_of(req).fingerprint)  # its claim expired
    core.request_tool(task, req, None, agent(), NOW)  # the retry, pending again
    late = call_of(req)
    late.in_flight = False

    core.report_result(task, late, ok(), NOW)

    assert task.pending == [late.fingerprint]


@pytest.mark.parametrize(
    ("grant", "excess"),
    [
        ({"model_calls": 20, "cost": D("5.00"), "seconds": 900}, set()),
        ({"model_calls": 21}, {"model_calls"}),
        ({"cost": D("5.000001")}, {"cost"}),
        ({"tokens": 200_001, "polls": 10, "retries": 4}, {"tokens", "retries"}),
        ({"model_calls": 2_147_483_647, "cost": D("99999999")}, {"model_calls", "cost"}),
        ({}, set()),
    ],
)
def test_the_grant_bound_is_the_original_limit_per_budget(grant, excess):
    found = core.grant_excess(grant, Limits())
    assert set(found) == excess
    assert all("admin" in sentence for sentence in found.values())


def test_the_grant_bound_names_every_grant_dimension():
    assert set(core.grant_bound(Limits())) == set(core.GRANT_LIMITS)


@pytest.mark.parametrize(
    ("mode", "result", "expected"),
    [
        ("evidence", ToolResult(kind="SUCCESS", data_hash="h"), None),
        ("novelty", ToolResult(kind="SUCCESS", data_hash="h"), "h"),
        ("novelty", ToolResult(kind="SUCCESS", data_hash="h", evidence=ev(1)), None),
        ("novelty", ToolResult(kind=PENDING, data_hash="h", job_id="j"), None),
        ("novelty", ToolResult(kind="SUCCESS"), None),
        ("novelty", ToolResult(kind="SUCCESS", data={"page": 1}), "data"),
    ],
)
def test_progress_hash_is_the_hash_novelty_judges_by(mode, result, expected):
    found = core.progress_hash(Limits(progress_mode=mode), result)
    if expected == "data":
        assert found == sha256_hex(canonical_json({"page": 1}))
    else:
        assert found == expected
