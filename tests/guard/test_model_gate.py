from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from decimal import Decimal

import pytest

from agents.guard.core import gate_model_call, settle_usage
from agents.guard.terms import (
    ALLOW,
    CONTINUE,
    PARTIAL,
    STOP,
    STOPPED,
    ModelCallRequest,
    UsageReport,
)

from .factories import NOW, agent, make_task

D = Decimal


def gate(task, estimate="0", now=NOW, **agent_kw):
    return gate_model_call(
        task, ModelCallRequest(estimate_cost=D(estimate)), agent(**agent_kw), now
    )


def settle(task, reserved="0", actual="0", tokens=0, signature=""):
    report = UsageReport(
        reserved_cost=D(reserved), actual_cost=D(actual), tokens=tokens, signature=signature
    )
    return settle_usage(task, report, NOW)


def test_it_allows_a_call_counts_it_and_reserves_the_estimate():
    task = make_task()
    out = gate(task, "0.25")
    assert out.decision == ALLOW and not out.stopped_now
    assert task.model_calls == 1
    assert task.cost_reserved == D("0.25")


def _deadline_passed(task):
    task.deadline_at = NOW


def _calls_used_up(task):
    task.model_calls = task.limits.max_model_calls


def _tokens_used_up(task):
    task.tokens_used = task.limits.max_tokens


def _money_almost_spent(task):
    task.cost_spent = D("4.00")
    task.cost_reserved = D("0.90")


@pytest.mark.parametrize(
    ("prepare", "estimate", "agent_kw", "state", "reason"),
    [
        (lambda t: None, "0", {"paused": True}, STOPPED, "agent_paused"),
        (_deadline_passed, "0", {}, PARTIAL, "deadline"),
        (_calls_used_up, "0", {}, PARTIAL, "model_budget"),
        (_tokens_used_up, "0", {}, PARTIAL, "token_budget"),
        (_money_almost_spent, "0.11", {}, PARTIAL, "cost_budget"),
        (
            lambda t: None,
            "0.5",
            {"daily_cap": D("10"), "spent_today": D("9.6")},
            PARTIAL,
            "spend_cap",
        ),
    ],
    ids=["agent_paused", "deadline", "model_budget", "token_budget", "cost_budget", "spend_cap"],
)
def test_it_stops_the_task_for_each_gate_reason(prepare, estimate, agent_kw, state, reason):
    task = make_task()
    prepare(task)
    calls_before, reserved_before = task.model_calls, task.cost_reserved
    out = gate(task, estimate, **agent_kw)
    assert (out.decision, out.reason, out.stopped_now) == (STOP, reason, True)
    assert (task.state, task.reason) == (state, reason)
    assert task.model_calls == calls_before
    assert task.cost_reserved == reserved_before


def test_it_allows_spending_exactly_up_to_the_cost_limit():
    task = make_task(max_cost=D("1.00"))
    task.cost_spent = D("0.60")
    task.cost_reserved = D("0.30")
    assert gate(task, "0.10").decision == ALLOW


def test_it_allows_spending_exactly_up_to_the_daily_cap():
    task = make_task()
    assert gate(task, "1", daily_cap=D("10"), spent_today=D("9")).decision == ALLOW


def test_it_ignores_the_spend_cap_when_the_agent_has_none():
    task = make_task()
    assert gate(task, "1", daily_cap=None, spent_today=D("999")).decision == ALLOW


def test_it_counts_the_deadline_as_passed_at_the_exact_instant():
    task = make_task(deadline_in=60)
    assert gate(task, now=NOW + timedelta(seconds=59)).decision == ALLOW
    assert gate(task, now=NOW + timedelta(seconds=60)).reason == "deadline"


def test_it_checks_pause_before_the_deadline_and_budgets():
    task = make_task()
    task.deadline_at = NOW
    task.model_calls = 99
    assert gate(task, paused=True).reason == "agent_paused"


def test_it_checks_the_model_budget_before_tokens_and_cost():
    task = make_task()
    task.model_calls = 20
    task.tokens_used = 10**9
    assert gate(task, "100").reason == "model_budget"


def test_a_stopped_task_answers_stop_with_its_reason_and_counts_nothing():
    task = make_task()
    gate(task, paused=True)
    before = asdict(task)
    out = gate(task, "1")
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "agent_paused", False)
    assert asdict(task) == before


def test_settling_replaces_the_reservation_by_the_actual_cost_and_counts_tokens():
    task = make_task()
    gate(task, "0.50")
    out = settle(task, reserved="0.50", actual="0.31", tokens=1200, signature="")
    assert out.decision == CONTINUE
    assert task.cost_reserved == D("0")
    assert task.cost_spent == D("0.31")
    assert task.tokens_used == 1200


def test_settling_never_makes_the_reservation_negative():
    task = make_task()
    task.cost_reserved = D("0.10")
    settle(task, reserved="0.50", actual="0.50")
    assert task.cost_reserved == D("0")
    assert task.cost_spent == D("0.50")


def test_settling_a_stopped_task_still_records_the_money_and_answers_stop():
    task = make_task()
    gate(task, "0.50")
    gate(task, paused=True)
    out = settle(task, reserved="0.50", actual="0.40", tokens=10, signature="abc")
    assert (out.decision, out.stopped_now, out.reason) == (STOP, False, "agent_paused")
    assert (task.cost_spent, task.cost_reserved, task.tokens_used) == (D("0.40"), D("0"), 10)
    assert task.signatures == []


def test_three_identical_non_empty_signatures_in_a_row_stop_with_repeated_output():
    task = make_task()
    assert settle(task, signature="s").decision == CONTINUE
    assert settle(task, signature="s").decision == CONTINUE
    out = settle(task, signature="s")
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "repeated_output", True)
    assert (task.state, task.reason) == (PARTIAL, "repeated_output")


def test_empty_signatures_never_count_as_repeated_output():
    task = make_task()
    for _ in range(5):
        assert settle(task, signature="").decision == CONTINUE


def test_a_different_signature_breaks_the_run():
    task = make_task()
    for sig in ["s", "s", "t", "s", "s"]:
        assert settle(task, signature=sig).decision == CONTINUE


def test_only_the_last_three_signatures_are_kept():
    task = make_task()
    for sig in ["a", "b", "c", "d"]:
        settle(task, signature=sig)
    assert task.signatures == ["b", "c", "d"]


def test_a_negative_estimate_reserves_nothing():
    task = make_task()
    task.cost_reserved = D("1")
    gate(task, "-0.5")
    assert task.cost_reserved == D("1")
