"""`TaskSession.tool` against a live server: one call to the guard, run, report, message."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from loopwarden_client import Client, TaskStopped, ToolReport

from agents.guard import terms
from agents.models import ToolCall
from ledger.models import Operation


def never(args: Any) -> Any:
    pytest.fail("the guard said this must not run")


def test_execute_runs_the_tool_and_reports_its_verified_evidence(lw):
    session = lw.session(lw.create_task("fetch")["id"])
    message = session.tool(
        "fetch_page", {"page": 1}, lambda args: {"page": args["page"], "rows": 3},
        inspect=lambda data: {"revision": data["page"], "done": False, "milestone": "page_1"},
    )  # fmt: skip
    assert message == {"success": True, "data": {"page": 1, "rows": 3}}
    call = ToolCall.objects.get(task_id=session.task_id)
    assert (call.decision, call.result_kind, call.result_data) == (
        terms.EXECUTE,
        "SUCCESS",
        {"page": 1, "rows": 3},
    )
    assert call.evidence == {"revision": 1, "done": False, "milestone": "page_1"}
    assert call.duration_ms is not None
    task = session.get()
    assert (task["revision"], task["usage"]["tool_executions"]) == (1, 1)


def test_a_repeated_call_is_blocked_with_the_guards_observation(lw):
    session = lw.session(lw.create_task("search")["id"])
    runs = []

    def search(args: dict[str, Any]) -> dict[str, Any]:
        runs.append(args)
        return {"hits": ["faq-12"]}

    for _ in range(2):
        assert session.tool("search", {"q": "refund"}, search)["success"] is True
    message = session.tool("search", {"q": "refund"}, search)
    assert message["success"] is False and message["retryable"] is False
    assert message["code"] == "DUPLICATE_TOOL_CALL_BLOCKED"
    assert len(runs) == 2
    with pytest.raises(TaskStopped) as caught:
        session.tool("search", {"q": "refund"}, search)
    assert (caught.value.state, caught.value.reason) == (terms.PARTIAL, "same_call")


def test_a_committed_write_is_reused_instead_of_run_again(lw):
    session = lw.session(lw.create_task("notify")["id"])
    sent = session.tool(
        "send_email", {"to": "ops@example.com"},
        lambda args: ToolReport(data={"message_id": "m-1"},
                                evidence={"revision": 1, "done": False, "committed": True}),
        effect="write", operation_key="incident-42-first-notice",
    )  # fmt: skip
    assert sent == {"success": True, "data": {"message_id": "m-1"}}
    again = session.tool("send_email", {"to": "ops@example.com"}, never, effect="write",
                         operation_key="incident-42-first-notice")  # fmt: skip
    assert again == {"success": True, "reused": True, "data": {"message_id": "m-1"}}


def test_wait_is_honoured_until_the_other_task_commits_the_key(api_url, agent_token):
    """Two tasks of one namespace want the same write; the second waits, then reuses it."""
    waited, running = threading.Event(), threading.Event()
    slept: list[float] = []

    def on_decision(endpoint: str, request: dict, answer: dict) -> None:
        if answer["decision"] == terms.WAIT:
            waited.set()

    def slow_send(args: dict[str, Any]) -> ToolReport:
        running.set()
        assert waited.wait(30), "the other task never got WAIT"
        return ToolReport(data={"message_id": "m-7"},
                          evidence={"revision": 1, "done": False, "committed": True})  # fmt: skip

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    with (
        Client(api_url, agent_token) as first,
        Client(api_url, agent_token, on_decision=on_decision) as second,
    ):
        task_a, task_b = first.create_task("notify A")["id"], first.create_task("notify B")["id"]
        call = {"tool": "send_email", "args": {"to": "ops@example.com"}, "effect": "write",
                "operation_key": "incident-7-notice"}  # fmt: skip
        outcome: dict[str, Any] = {}
        holder = threading.Thread(
            target=lambda: outcome.update(a=first.session(task_a).tool(execute=slow_send, **call))
        )
        holder.start()
        assert running.wait(30)
        message = second.session(task_b, sleep=sleep).tool(execute=never, **call)
        holder.join(30)

    assert outcome["a"] == {"success": True, "data": {"message_id": "m-7"}}
    assert message == {"success": True, "reused": True, "data": {"message_id": "m-7"}}
    assert slept and slept[0] == 1.0  # the server's retry_after_ms
    decisions = list(ToolCall.objects.filter(task_id=task_b).values_list("decision", flat=True))
    assert decisions[0] == terms.WAIT and decisions[-1] == terms.REUSE
    assert Operation.objects.get(operation_key="incident-7-notice").state == terms.OP_COMMITTED


def test_waiting_is_bounded_by_max_wait_tries(lw):
    holder, waiter = lw.create_task("holds the key")["id"], lw.create_task("waits")["id"]
    call = {"tool": "pay", "args": {"invoice": "I-3"}, "effect": "write",
            "operation_key": "pay-I-3"}  # fmt: skip
    assert lw.request_tool(holder, **call)["decision"] == terms.EXECUTE  # and never reports
    message = lw.session(waiter, max_wait_tries=2).tool(execute=never, **call)
    assert (message["code"], message["retryable"]) == ("OPERATION_IN_FLIGHT", True)
    assert ToolCall.objects.filter(task_id=waiter, decision=terms.WAIT).count() == 2


def test_an_exception_is_reported_as_no_result_and_stops_the_task(lw):
    session = lw.session(lw.create_task("pay")["id"])

    def pay(args: dict[str, Any]) -> Any:
        raise TimeoutError("payments API: no answer within 10 s")

    with pytest.raises(TaskStopped) as caught:
        session.tool("pay", {"invoice": "I-5"}, pay, effect="write", operation_key="pay-I-5")
    stopped = caught.value
    assert isinstance(stopped.__cause__, TimeoutError)
    assert (stopped.state, stopped.reason, stopped.code) == (
        terms.NEEDS_HUMAN,
        "unknown_commit",
        "GUARD_LEDGER",
    )
    assert stopped.report["operations"] == [{"key": "pay-I-5", "state": terms.UNKNOWN}]
    call = ToolCall.objects.get(task_id=session.task_id)
    assert call.result_kind == terms.NO_RESULT
    assert call.result_error == "TimeoutError: payments API: no answer within 10 s"


def test_a_pending_result_is_waited_out_before_the_job_is_polled(lw):
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        time.sleep(seconds)

    session = lw.session(lw.create_task("export")["id"], sleep=sleep)
    started = session.tool(
        "start_export", {"month": "2026-10"},
        lambda args: ToolReport(kind="PENDING", job_id="job-1", wait_ms=20),
    )  # fmt: skip
    assert (started["success"], started["retryable"], started["job_id"]) == (False, True, "job-1")
    assert slept == [0.02]
    polled = session.tool(
        "export_status", {"job": "job-1"}, lambda args: {"file": "export.csv"}, job_id="job-1",
        inspect=lambda data: {"revision": 1, "done": False},
    )  # fmt: skip
    assert polled == {"success": True, "data": {"file": "export.csv"}}
    assert session.get()["usage"]["polls"] == 1


def test_a_result_that_completes_the_task_returns_and_keeps_the_report(lw):
    session = lw.session(lw.create_task("refund order 7")["id"])
    message = session.tool(
        "refund", {"order": 7},
        lambda args: ToolReport(data={"refund_id": "r-7"},
                                evidence={"revision": 1, "done": True, "committed": True}),
        effect="write", operation_key="refund-7",
    )  # fmt: skip
    assert message == {"success": True, "data": {"refund_id": "r-7"}}
    assert (session.report["state"], session.report["reason"]) == (terms.COMPLETED, "goal_met")
    with pytest.raises(TaskStopped) as caught:  # sticky: the next gate repeats the report
        session.client.gate_model_call(session.task_id)
    assert caught.value.report == session.report


def test_a_lone_surrogate_in_a_writes_result_commits_and_is_reused_as_it_was(lw):
    """UTF-8 has no form for a lone surrogate: the client sends it as a JSON escape, and the
    ledger (PostgreSQL's jsonb refuses its escape too) keeps it encoded and gives it back."""
    session = lw.session(lw.create_task("export a cut emoji")["id"])
    data = {"note": "paid \ud83d", "raw": "x\x00y"}

    def committed(result: Any) -> dict:
        return {"revision": 1, "done": False, "committed": True}

    first = session.tool("export", {"n": 1}, lambda args: data, effect="write",
                         operation_key="export-surrogate", inspect=committed)  # fmt: skip
    again = session.tool("export", {"n": 1}, never, effect="write",
                         operation_key="export-surrogate", inspect=committed)  # fmt: skip
    assert first == {"success": True, "data": data}
    assert Operation.objects.get(operation_key="export-surrogate").state == "COMMITTED"
    assert again == {"success": True, "reused": True, "data": data}
