"""Tasks for the layout tests, made by the thin client over HTTP as an outside agent would:
a looping search (a full trace and dashboard row) and a write whose answer was lost (an
UNKNOWN operation waiting on the reconcile queue), with the text lengths an agent may send."""

from __future__ import annotations

from contextlib import suppress

from loopwarden_client import TaskStopped

SEARCH = {"query": "loopwarden enterprise price"}


def looping_search(agent, goal: str = "Find the enterprise price in the knowledge base") -> str:
    """RUNNING, the same search asked three times: the trace shows repeats and a BLOCK."""
    task = agent.create_task(goal, profile="patient")
    gate = agent.gate_model_call(task["id"], model="sim-model", est_prompt_tokens=800)
    agent.report_usage(task["id"], gate["model_call"], prompt_tokens=800, completion_tokens=40,
                       tool_calls=[{"name": "kb_search", "args": SEARCH}])  # fmt: skip
    for _ in range(2):
        asked = agent.request_tool(task["id"], "kb_search", SEARCH)
        agent.report_result(task["id"], asked["tool_call"], "SUCCESS", data={"hits": []})
    agent.request_tool(task["id"], "kb_search", SEARCH)
    return task["id"]


def lost_write(agent, operation_key: str, goal: str = "Pay invoice INV-42 exactly once") -> str:
    """NEEDS_HUMAN: a payment's answer was lost, its operation under `operation_key` UNKNOWN."""
    task = agent.create_task(goal)
    asked = agent.request_tool(
        task["id"], "pay_invoice", {"invoice": "INV-42"}, effect="write",
        operation_key=operation_key,
    )  # fmt: skip
    with suppress(TaskStopped):  # the guard hands the lost write to a human: the point
        agent.report_result(task["id"], asked["tool_call"], "NO_RESULT")
    return task["id"]
