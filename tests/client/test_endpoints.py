"""Every endpoint of the sync client against a live server, as an agent and as operators."""

from __future__ import annotations

import pytest
from loopwarden_client import Client, LoopwardenError, TaskStopped

from agents.guard import terms
from agents.models import Task


def test_an_agent_creates_reads_and_traces_a_task(lw):
    task = lw.create_task("Export every invoice", limits={"max_model_calls": 5},
                          external_ref="ticket-1")  # fmt: skip
    assert task["state"] == terms.RUNNING and task["limits"]["max_model_calls"] == 5
    assert task["external_ref"] == "ticket-1"
    assert lw.get_task(task["id"])["id"] == task["id"]
    lw.gate_model_call(task["id"], model="m")
    trace = lw.trace(task["id"])
    assert [call["type"] for call in trace["calls"]] == ["model_call"]
    assert "task_created" in [event["kind"] for event in trace["events"]]


def test_a_model_call_is_gated_then_settled(lw):
    task_id = lw.create_task("plan")["id"]
    allowed = lw.gate_model_call(task_id, model="m", est_prompt_tokens=100, max_output_tokens=20)
    assert (allowed["decision"], allowed["round"]) == (terms.ALLOW, 1)
    settled = lw.report_usage(
        task_id, allowed["model_call"], prompt_tokens=90, completion_tokens=10,
        tool_calls=[{"name": "search", "args": {"q": "x"}, "effect": "read"}],
    )  # fmt: skip
    assert settled == {"decision": terms.CONTINUE}
    usage = lw.get_task(task_id)["usage"]
    assert (usage["model_calls"], usage["tokens"]) == (1, 100)


def test_a_tool_is_requested_then_its_verified_result_reported(lw):
    task_id = lw.create_task("fetch")["id"]
    answer = lw.request_tool(task_id, "fetch_page", {"page": 1}, call_id="c1")
    assert answer["decision"] == terms.EXECUTE and answer["fingerprint"]
    reply = lw.report_result(
        task_id, answer["tool_call"], "SUCCESS", data={"page": 1},
        evidence={"revision": 1, "done": False}, duration_ms=3,
    )  # fmt: skip
    assert reply == {"decision": terms.CONTINUE, "revision": 1}
    call = lw.trace(task_id)["calls"][0]
    assert (call["call_id"], call["result_kind"], call["duration_ms"]) == ("c1", "SUCCESS", 3)


def test_finish_with_verified_evidence_completes_the_task(lw):
    task_id = lw.create_task("finish")["id"]
    task = lw.finish(task_id, evidence={"revision": 0, "done": True}, answer="all done")
    assert (task["state"], task["reason"]) == (terms.COMPLETED, "goal_met")


def test_finish_without_evidence_is_only_partial(lw):
    task = lw.finish(lw.create_task("claim")["id"], answer="trust me")
    assert (task["state"], task["reason"]) == (terms.PARTIAL, "goal_unverified")


def test_a_stop_is_sticky_and_every_guard_endpoint_raises_it(lw):
    task_id = lw.create_task("stop me")["id"]
    task = lw.stop(task_id, reason="enough", request_id="r1")
    assert (task["state"], task["reason"]) == (terms.STOPPED, "agent_stop")
    assert lw.stop(task_id, request_id="r1")["report"] == task["report"]
    with pytest.raises(TaskStopped) as gate:
        lw.gate_model_call(task_id)
    with pytest.raises(TaskStopped) as tool:
        lw.request_tool(task_id, "t", {})
    for stopped in (gate.value, tool.value):
        assert stopped.report == task["report"]
        assert (stopped.state, stopped.reason, stopped.code) == (
            terms.STOPPED,
            "agent_stop",
            "GUARD_STOPPED",
        )
        assert stopped.task_id == task_id


def test_the_decision_hook_sees_every_decision(api_url, agent_token):
    seen = []
    with Client(api_url, agent_token, on_decision=lambda *args: seen.append(args)) as client:
        task_id = client.create_task("hooked")["id"]
        client.gate_model_call(task_id)
        client.stop(task_id)
        with pytest.raises(TaskStopped):
            client.request_tool(task_id, "t", {"a": 1})
    assert [(name, answer["decision"]) for name, _, answer in seen] == [
        ("gate_model_call", terms.ALLOW),
        ("request_tool", terms.STOP),
    ]
    assert seen[1][1] == {"tool": "t", "args": {"a": 1}, "effect": "read"}


def test_list_tasks_sees_only_the_agents_own_tasks_filtered_by_state(lw, lw_other):
    running = lw.create_task("one")["id"]
    stopped = lw.create_task("two")["id"]
    lw.stop(stopped)
    lw_other.create_task("someone else's")
    assert {t["id"] for t in lw.list_tasks()} == {running, stopped}
    assert [t["id"] for t in lw.list_tasks(state=terms.STOPPED)] == [stopped]


def test_an_operator_reconciles_an_unknown_write_and_resumes_the_task(lw, lw_operator):
    task_id = lw.create_task("pay")["id"]
    answer = lw.request_tool(task_id, "pay", {"invoice": "I-1"}, effect="write",
                             operation_key="pay-I-1")  # fmt: skip
    with pytest.raises(TaskStopped) as caught:
        lw.report_result(task_id, answer["tool_call"], "NO_RESULT", error="timeout")
    assert (caught.value.state, caught.value.reason) == (terms.NEEDS_HUMAN, "unknown_commit")

    [operation] = lw_operator.list_operations(state=terms.UNKNOWN)
    assert operation["key"] == "pay-I-1"
    assert lw_operator.get_operation(operation["id"])["state"] == terms.UNKNOWN
    with pytest.raises(LoopwardenError) as refused:
        lw_operator.resume(task_id, reason="paid?")
    assert (refused.value.status, refused.value.code) == (409, "OPERATIONS_UNRESOLVED")

    reconciled = lw_operator.reconcile(
        operation["id"], verdict=terms.OP_COMMITTED, note="provider shows it paid",
        result={"payment": "P-9"},
    )  # fmt: skip
    assert reconciled["state"] == terms.OP_COMMITTED
    assert reconciled["reconciliations"][0]["actor"] == "user:olivia"
    task = lw_operator.resume(task_id, reason="reconciled", grant={"tool_executions": 1})
    assert (task["state"], task["phase"]) == (terms.RUNNING, 2)
    again = lw.request_tool(task_id, "pay", {"invoice": "I-1"}, effect="write",
                            operation_key="pay-I-1")  # fmt: skip
    assert (again["decision"], again["result"]) == (terms.REUSE, {"payment": "P-9"})


def test_an_admin_changes_a_tasks_limits(lw, lw_admin, lw_operator):
    task_id = lw.create_task("limits")["id"]
    task = lw_admin.set_limits(task_id, {"max_model_calls": 3}, reason="cheap task")
    assert task["limits"]["max_model_calls"] == 3
    with pytest.raises(LoopwardenError) as refused:
        lw_operator.set_limits(task_id, {"max_model_calls": 30})
    assert (refused.value.status, refused.value.code) == (403, "FORBIDDEN")


def test_pausing_the_agent_stops_its_next_decision(lw, lw_admin):
    task_id = lw.create_task("paused")["id"]
    assert lw_admin.pause_agent("agent-a", "runaway spend")["paused"] is True
    with pytest.raises(TaskStopped) as caught:
        lw.gate_model_call(task_id)
    assert (caught.value.state, caught.value.reason) == (terms.STOPPED, "agent_paused")
    assert lw_admin.unpause_agent("agent-a", "fixed")["paused"] is False
    assert lw.gate_model_call(lw.create_task("again")["id"])["decision"] == terms.ALLOW


def test_refusals_raise_loopwarden_errors_with_the_envelope(lw, lw_other, api_url):
    task_id = lw.create_task("mine")["id"]
    with pytest.raises(LoopwardenError) as bad:
        lw.request_tool(task_id, "t", {}, effect="delete")
    assert (bad.value.status, bad.value.code) == (400, "INVALID_FIELDS")
    assert "effect" in bad.value.fields
    with pytest.raises(LoopwardenError) as missing:
        lw_other.get_task(task_id)
    assert (missing.value.status, missing.value.code) == (404, "TASK_NOT_FOUND")
    with pytest.raises(LoopwardenError) as agent_only:
        lw.resume(task_id, reason="let me")
    assert agent_only.value.status == 403
    with Client(api_url, "lw_not-a-token") as stranger, pytest.raises(LoopwardenError) as who:
        stranger.list_tasks()
    assert (who.value.status, who.value.code) == (401, "UNAUTHENTICATED")
    assert Task.objects.count() == 1  # a refusal changes nothing


def test_a_restarting_trigger_is_refused_with_trigger_loop(lw):
    for _ in range(5):
        lw.create_task("nightly sync", trigger_key="cron-sync")
    with pytest.raises(LoopwardenError) as caught:
        lw.create_task("nightly sync", trigger_key="cron-sync")
    assert (caught.value.status, caught.value.code) == (429, "TRIGGER_LOOP")


def test_lists_and_the_trace_follow_every_page(lw, lw_operator):
    """docs/DESIGN.md: lists are paginated with a `next` link and none is silently cut. The client
    follows the links: a small page size changes the number of requests, not the answer."""
    made = {lw.create_task(f"task {n}")["id"] for n in range(5)}
    task_id = sorted(made)[0]
    for n in range(5):
        lw.request_tool(task_id, "fetch_page", {"page": n})

    assert {t["id"] for t in lw.list_tasks(page_size=2)} == made
    assert len(lw_operator.list_tasks(page_size=2)) == 5
    paged, whole = lw.trace(task_id, page_size=2), lw.trace(task_id)
    assert [c["seq"] for c in paged["calls"]] == [c["seq"] for c in whole["calls"]]
    assert len(paged["calls"]) == 5 and paged["next"] is None
    assert paged["events"] == whole["events"]
