"""Reading a task: its shape, its trace, and the operator's filtered list."""

from __future__ import annotations

import pytest

from .helpers import evidence, execute, gate, get_task, new_task, request_tool, settle

pytestmark = pytest.mark.django_db


def test_it_creates_a_task_in_phase_one_with_the_default_limits(agent_api):
    task = new_task(agent_api, external_ref="INC-42", trigger_key="pager-42")

    assert task["state"] == "RUNNING"
    assert (task["reason"], task["code"], task["report"]) == (None, None, None)
    assert task["phase"] == 1
    assert task["revision"] == 0
    assert (task["external_ref"], task["trigger_key"]) == ("INC-42", "pager-42")
    assert task["limits"]["max_model_calls"] == 20
    assert task["limits"]["max_same_call"] == 2
    assert task["usage"] == {
        "model_calls": 0,
        "tool_requests": 0,
        "tool_executions": 0,
        "retries": 0,
        "polls": 0,
        "tokens": 0,
        "cost": "0.0000",
    }
    assert task["remaining"]["model_calls"] == 20
    assert get_task(agent_api, task["id"]) == task


def test_it_traces_model_calls_tool_calls_and_events_in_order(agent_api):
    task = new_task(agent_api)
    allowed = gate(agent_api, task["id"], model="gpt-x")
    settle(
        agent_api,
        task["id"],
        allowed["model_call"],
        tool_calls=[{"name": "search", "args": {"q": "x"}}],
    )
    execute(
        agent_api,
        task["id"],
        "search",
        {"q": "x"},
        model_call=allowed["model_call"],
        call_id="call_1",
        result={"kind": "SUCCESS", "evidence": evidence(1)},
    )
    agent_api.post(f"tasks/{task['id']}/finish", {"evidence": evidence(2, done=True)})

    trace = agent_api.get(f"tasks/{task['id']}/trace").body

    calls = trace["calls"]
    assert [c["type"] for c in calls] == ["model_call", "tool_call"]
    assert [c["seq"] for c in calls] == [1, 2]
    assert calls[0]["prompt_tokens"] == 100
    assert calls[1]["model_call"] == allowed["model_call"]
    assert calls[1]["call_id"] == "call_1"
    assert calls[1]["revision_after"] == 1
    assert calls[1]["result_kind"] == "SUCCESS"
    kinds = [e["kind"] for e in trace["events"]]
    assert kinds[0] == "task_created"
    assert kinds[-1] == "task_completed"


def test_it_records_a_trace_row_for_each_stop_answer(agent_api):
    task = new_task(agent_api)
    agent_api.post(f"tasks/{task['id']}/stop", {})

    request_tool(agent_api, task["id"], "search", {"q": "x"})

    trace = agent_api.get(f"tasks/{task['id']}/trace").body["calls"]
    assert [(c["type"], c["decision"]) for c in trace] == [("tool_call", "STOP")]


def test_it_filters_the_operator_list_by_state(agent_api, operator_api):
    running = new_task(agent_api)
    stopped = new_task(agent_api)
    agent_api.post(f"tasks/{stopped['id']}/stop", {})

    listed = operator_api.get("tasks?state=STOPPED").body["tasks"]

    assert [t["id"] for t in listed] == [stopped["id"]]
    assert running["id"] not in [t["id"] for t in listed]
    bad = operator_api.get("tasks?state=SLEEPING")
    assert bad.status_code == 400
    assert bad.body["error"]["code"] == "BAD_STATE"
