"""`run(plan, execute, inspect)` against a live server: whole agent loops, start to stop."""

from __future__ import annotations

from typing import Any

from loopwarden_client import Plan, run

from agents.guard import terms
from agents.models import ToolPolicy

History = list[dict[str, Any]]


def invoice_page(number: int) -> dict[str, Any]:
    """A paged invoices API: three pages, the last has no next page."""
    invoices = [f"INV-{number}{i}" for i in range(3)]
    return {"page": number, "invoices": invoices, "next_page": number + 1 if number < 3 else None}


def tool_messages(history: History) -> list[dict[str, Any]]:
    return [item["content"] for item in history if item["role"] == "tool"]


def test_a_paginated_export_runs_to_completed_on_verified_evidence(lw):
    task_id = lw.create_task("Export every invoice")["id"]

    def plan(history: History) -> Plan:
        pages = [m["data"] for m in tool_messages(history) if m["success"]]
        page = pages[-1]["next_page"] if pages else 1
        call = {"name": "fetch_invoices", "args": {"page": page}, "id": f"call-{page}"}
        return Plan(tool_calls=[call], prompt_tokens=100, completion_tokens=20)

    def execute(name: str, args: dict[str, Any]) -> dict[str, Any]:
        assert name == "fetch_invoices"
        return invoice_page(args["page"])

    def inspect(name: str, args: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        # The application's verifier: the page is stored, and the last page ends the export.
        return {"revision": data["page"], "done": data["next_page"] is None,
                "milestone": f"page_{data['page']}"}  # fmt: skip

    task = run(lw, task_id, plan, execute, inspect, model="m", est_prompt_tokens=100)

    assert (task["state"], task["reason"], task["revision"]) == (terms.COMPLETED, "goal_met", 3)
    assert task["report"]["completed"] == ["page_1", "page_2", "page_3"]
    assert (task["usage"]["model_calls"], task["usage"]["tool_executions"]) == (3, 3)
    calls = [c for c in lw.trace(task_id)["calls"] if c["type"] == "tool_call"]
    assert [c["call_id"] for c in calls] == ["call-1", "call-2", "call-3"]


def test_a_search_repeated_with_a_fresh_nonce_is_blocked_then_stopped_as_same_call(lw):
    """The model varies only a request id the tool ignores: the same call to the guard."""
    ToolPolicy.objects.create(tool="search_kb", ignore_fields=["request_id"])
    task_id = lw.create_task("Find the refund policy")["id"]
    executed: list[dict[str, Any]] = []

    def plan(history: History) -> Plan:
        nonce = len(history)
        call = {"name": "search_kb", "args": {"query": "refund policy", "request_id": nonce}}
        return Plan(tool_calls=[call], prompt_tokens=50, completion_tokens=10)

    def execute(name: str, args: dict[str, Any]) -> dict[str, Any]:
        executed.append(args)
        return {"hits": ["Loopwarden FAQ #12", "Loopwarden FAQ #40"]}

    task = run(lw, task_id, plan, execute, lambda name, args, data: None)

    assert (task["state"], task["reason"], task["code"]) == (
        terms.PARTIAL,
        "same_call",
        "GUARD_LOOP_DETECTED",
    )
    assert len(executed) == 2  # the third was blocked, the fourth stopped the task
    decisions = [c["decision"] for c in lw.trace(task_id)["calls"] if c["type"] == "tool_call"]
    assert decisions == [terms.EXECUTE, terms.EXECUTE, terms.BLOCK, terms.STOP]


def test_the_same_plan_again_and_again_stops_as_repeated_output(lw):
    task_id = lw.create_task("Find the refund policy")["id"]
    same = Plan(tool_calls=[{"name": "search_kb", "args": {"query": "refund policy"}}])
    task = run(lw, task_id, lambda history: same, lambda name, args: {"hits": []})
    assert (task["state"], task["reason"]) == (terms.PARTIAL, "repeated_output")
    assert task["usage"]["model_calls"] == 3


def test_a_loop_that_runs_out_of_rounds_stops_its_task(lw):
    task_id = lw.create_task("Count pages")["id"]
    plan = Plan(tool_calls=[{"name": "count", "args": {}}])
    verified = iter(range(1, 100))
    task = run(lw, task_id, lambda history: plan, lambda name, args: {"n": 1},
               lambda name, args, data: {"revision": next(verified), "done": False},
               max_rounds=2)  # fmt: skip
    assert (task["state"], task["reason"]) == (terms.STOPPED, "agent_stop")
    stop = next(e for e in lw.trace(task_id)["events"] if e["kind"] == "stop_requested")
    assert stop["reason"] == "client loop gave up after 2 rounds"


def test_a_plan_that_finishes_with_evidence_completes_the_task(lw):
    task_id = lw.create_task("Answer")["id"]
    task = run(lw, task_id, lambda h: Plan(done=True, evidence={"revision": 0, "done": True},
                                          answer="42"),
               lambda name, args: None)  # fmt: skip
    assert (task["state"], task["reason"]) == (terms.COMPLETED, "goal_met")


def test_a_plan_that_stops_asking_for_tools_finishes_the_task_with_its_answer(lw):
    """The agent's final answer ends the loop: finished, not asked again until a budget trips."""
    task_id = lw.create_task("Answer")["id"]
    task = run(lw, task_id, lambda h: Plan(answer="Refunds take 5 days."), lambda name, args: None)
    assert (task["state"], task["reason"]) == (terms.PARTIAL, "goal_unverified")
    assert task["usage"]["model_calls"] == 1
