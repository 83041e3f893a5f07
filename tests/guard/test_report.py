from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from agents.guard.core import build_report, reason_code, remaining, usage
from agents.guard.terms import COMPLETED, NEEDS_HUMAN, PARTIAL, REASON_CODES, STOPPED

from .factories import NOW, make_task


def test_the_report_has_exactly_the_shape_of_the_design_example():
    task = make_task(max_model_calls=10, max_tool_executions=6)
    task.state, task.reason = NEEDS_HUMAN, "unknown_commit"
    task.milestones = ["incident_loaded", "recipient_validated"]
    task.model_calls, task.tool_requests, task.tool_executions = 6, 9, 4
    task.tokens_used, task.cost_spent = 5120, Decimal("0.03")
    operations = [{"key": "incident-42-first-notice", "state": "UNKNOWN", "id": 3}]
    report = build_report(task, NOW, operations)
    assert report == {
        "state": "NEEDS_HUMAN",
        "reason": "unknown_commit",
        "code": "GUARD_LEDGER",
        "phase": 1,
        "at": "2026-11-30T10:00:00Z",
        "completed": ["incident_loaded", "recipient_validated"],
        "operations": [{"key": "incident-42-first-notice", "state": "UNKNOWN"}],
        "usage": {
            "model_calls": 6,
            "tool_requests": 9,
            "tool_executions": 4,
            "retries": 0,
            "polls": 0,
            "tokens": 5120,
            "cost": "0.0300",
        },
        "remaining": {
            "model_calls": 4,
            "tool_requests": 31,
            "tool_executions": 2,
            "tokens": 194880,
            "cost": "4.9700",
        },
        "resume_condition": (
            "Reconcile operation incident-42-first-notice, then an operator may resume."
        ),
    }
    assert task.report is report


def test_the_report_time_is_utc_with_a_z_whatever_the_input_zone():
    task = make_task(state=PARTIAL)
    task.reason = "deadline"
    paris = timezone(timedelta(hours=1))
    at = datetime(2026, 11, 30, 11, 0, 0, 123456, tzinfo=paris)
    assert build_report(task, at, [])["at"] == "2026-11-30T10:00:00Z"
    assert build_report(task, datetime(2026, 1, 2, 3, 4, 5), [])["at"] == "2026-01-02T03:04:05Z"


def test_a_completed_task_has_no_code_and_nothing_to_resume():
    task = make_task(state=COMPLETED)
    task.reason = "goal_met"
    report = build_report(task, NOW, [])
    assert report["code"] is None
    assert "nothing to resume" in report["resume_condition"]


@pytest.mark.parametrize(
    ("reason", "grant"),
    [
        ("model_budget", "model_calls"),
        ("request_budget", "tool_requests"),
        ("execution_budget", "tool_executions"),
        ("retry_budget", "retries"),
        ("poll_budget", "polls"),
        ("token_budget", "tokens"),
        ("cost_budget", "cost"),
        ("deadline", "seconds"),
    ],
)
def test_a_budget_stop_says_which_grant_lifts_it(reason, grant):
    task = make_task(state=PARTIAL)
    task.reason = reason
    condition = build_report(task, NOW, [])["resume_condition"]
    assert f"resume with a {grant} grant" in condition


@pytest.mark.parametrize("reason", [r for r in REASON_CODES if r != "goal_met"])
def test_every_stop_reason_has_a_resume_condition_sentence(reason):
    task = make_task(state=PARTIAL)
    task.reason = reason
    condition = build_report(task, NOW, [])["resume_condition"]
    assert condition.endswith(".") and "operator may resume" in condition


def test_open_operations_come_first_in_the_resume_condition_whatever_the_reason():
    task = make_task(state=STOPPED)
    task.reason = "operator_stop"
    ops = [
        {"key": "a", "state": "UNKNOWN"},
        {"key": "b", "state": "UNKNOWN"},
        {"key": "c", "state": "IN_FLIGHT"},
        {"key": "d", "state": "COMMITTED"},
    ]
    assert build_report(task, NOW, ops)["resume_condition"] == (
        "Reconcile operations a, b and wait for or reconcile in-flight operation c, "
        "then an operator may resume."
    )


@pytest.mark.parametrize(("reason", "code"), list(REASON_CODES.items()))
def test_reason_code_maps_every_reason(reason, code):
    assert reason_code(reason) == code


def test_reason_code_of_no_reason_is_none():
    assert reason_code(None) is None


def test_usage_cost_is_settled_spend_with_four_decimals():
    task = make_task()
    task.cost_spent, task.cost_reserved = Decimal("0.123456"), Decimal("1")
    assert usage(task)["cost"] == "0.1235"


def test_remaining_is_never_negative_and_subtracts_reservations():
    task = make_task(max_cost=Decimal("1"))
    task.model_calls, task.tokens_used = 25, 10**9
    task.cost_spent, task.cost_reserved = Decimal("0.5"), Decimal("0.25")
    left = remaining(task)
    assert (left["model_calls"], left["tokens"], left["cost"]) == (0, 0, "0.2500")
    task.cost_spent = Decimal("2")
    assert remaining(task)["cost"] == "0.0000"
