"""Repeated output by similarity: drifting plans and repeated reflections (threshold set only)."""

from __future__ import annotations

from decimal import Decimal

from agents.guard.fingerprint import action_signature, plan_text
from agents.guard.model import settle_usage
from agents.guard.terms import CONTINUE, PARTIAL, STOP, SUCCESS, ToolResult, UsageReport
from agents.guard.tool import report_result, request_tool

from .factories import NOW, agent, call_of, ev, make_task, read


def plan(q: str, **extra):
    return [{"name": "search", "args": {"q": q, **extra}}]


def settle(task, calls=None, output_text=""):
    usage = UsageReport(
        reserved_cost=Decimal(0), actual_cost=Decimal(0), tokens=0,
        signature=action_signature(calls), plan_text=plan_text(calls), output_text=output_text,
    )  # fmt: skip
    return settle_usage(task, usage, NOW)


DRIFT = [plan("refund policy"), plan("policy for refunds"), plan("refunds policy")]


def test_three_similar_plans_in_a_row_stop_with_repeated_output():
    task = make_task(near_duplicate_threshold=0.8)
    decisions = [settle(task, calls).decision for calls in DRIFT]
    assert decisions == [CONTINUE, CONTINUE, STOP]
    assert (task.state, task.reason) == (PARTIAL, "repeated_output")


def test_without_a_threshold_drifting_plans_are_not_repeated_output():
    task = make_task()
    assert [settle(task, calls).decision for calls in DRIFT] == [CONTINUE] * 3
    assert task.plans == [] and task.reflection == ""


def test_plans_that_page_through_results_are_not_similar():
    task = make_task(near_duplicate_threshold=0.5)
    for page in (1, 2, 3, 4):
        assert settle(task, plan("overdue invoices", page=page)).decision == CONTINUE


def test_the_plan_streak_restarts_on_verified_progress():
    task = make_task(near_duplicate_threshold=0.8, max_stagnant=10)
    settle(task, DRIFT[0])
    settle(task, DRIFT[1])
    req = read(q="anything")
    request_tool(task, req, None, agent(), NOW)
    report_result(task, call_of(req), ToolResult(kind=SUCCESS, evidence=ev(1)), NOW)
    assert settle(task, DRIFT[2]).decision == CONTINUE


def test_the_plan_streak_restarts_on_a_status_poll():
    task = make_task(near_duplicate_threshold=0.8)
    settle(task, DRIFT[0])
    settle(task, DRIFT[1])
    request_tool(task, read(tool="job_status", job_id="j1"), None, agent(), NOW)
    assert settle(task, DRIFT[2]).decision == CONTINUE


def test_a_round_without_tool_calls_breaks_the_plan_streak():
    task = make_task(near_duplicate_threshold=0.8)
    settle(task, DRIFT[0])
    settle(task, None)
    settle(task, DRIFT[1])
    assert settle(task, DRIFT[2]).decision == CONTINUE
    assert settle(task, DRIFT[0]).decision == STOP  # a new run of three


def test_two_similar_reflections_in_a_row_stop_with_repeated_output():
    task = make_task(near_duplicate_threshold=0.8)
    assert settle(task, output_text="I should check the refund policy again.").decision == CONTINUE
    out = settle(task, output_text="I should check the refund policy again!")
    assert (out.decision, task.reason) == (STOP, "repeated_output")


def test_different_reflections_continue():
    task = make_task(near_duplicate_threshold=0.8)
    settle(task, output_text="Searching the refund policy.")
    assert settle(task, output_text="Now drafting the reply to the customer.").decision == CONTINUE


def test_an_agent_that_narrates_its_pagination_is_not_repeating_itself():
    # At the recommended 0.50 (and up to 0.80) the reflection check stopped it at its second
    # turn: "page 2" and "page 3" are one word apart. The plans themselves (page=2, page=3)
    # are rightly never similar.
    task = make_task(near_duplicate_threshold=0.5, max_stagnant=10)
    for page in (2, 3, 4):
        text = f"Page {page - 1} had 50 invoices; let me fetch page {page}."
        assert settle(task, plan("overdue invoices", page=page), text).decision == CONTINUE
