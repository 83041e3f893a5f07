"""The agent-level kill switch: an admin pauses an agent, its tasks stop at their next gate."""

from __future__ import annotations

import pytest

from agents.models import Agent, Event

from .helpers import assert_stop_is_sticky, assert_stopped, execute, gate, new_task, request_tool

pytestmark = pytest.mark.django_db


def pause(api, name="agent-a", reason="burning money"):
    return api.post(f"agents/{name}/pause", {"reason": reason})


def test_it_stops_the_next_model_call_of_a_paused_agent(agent_api, admin_api):
    task = new_task(agent_api)
    allowed = gate(agent_api, task["id"])
    assert allowed["decision"] == "ALLOW"

    response = pause(admin_api)
    assert response.status_code == 200
    assert response.body == {"name": "agent-a", "paused": True, "paused_reason": "burning money"}
    answer = gate(agent_api, task["id"])

    stop_report = assert_stopped(answer, "STOPPED", "agent_paused", "GUARD_STOPPED")
    assert stop_report["usage"]["model_calls"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_stops_the_next_tool_request_of_a_paused_agent(agent_api, admin_api):
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "a"})
    pause(admin_api)

    answer = request_tool(agent_api, task["id"], "search", {"q": "b"})

    stop_report = assert_stopped(answer, "STOPPED", "agent_paused", "GUARD_STOPPED")
    assert stop_report["usage"]["tool_executions"] == 1
    assert stop_report["usage"]["tool_requests"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_leaves_other_agents_running(agent_api, other_agent_api, admin_api):
    theirs = new_task(other_agent_api)
    pause(admin_api)

    assert gate(other_agent_api, theirs["id"])["decision"] == "ALLOW"


def test_it_lets_an_unpaused_agent_start_again(agent_api, admin_api):
    pause(admin_api)
    response = admin_api.post("agents/agent-a/unpause", {"reason": "fixed"})
    assert response.status_code == 200
    assert response.body["paused"] is False
    task = new_task(agent_api)

    assert gate(agent_api, task["id"])["decision"] == "ALLOW"
    assert list(
        Event.objects.filter(agent__name="agent-a")
        .values_list("kind", flat=True)
        .filter(kind__startswith="agent_")
    ) == ["agent_paused", "agent_unpaused"]


def test_it_requires_a_reason_to_pause(admin_api, agent_api):
    response = pause(admin_api, reason="  ")

    assert response.status_code == 400
    assert "reason" in response.body["error"]["fields"]
    assert Agent.objects.get(name="agent-a").paused is False


def test_it_answers_404_for_an_unknown_agent(admin_api):
    assert pause(admin_api, name="nobody").status_code == 404


def test_it_lets_an_operator_resume_a_paused_task_once_the_agent_is_unpaused(
    agent_api, admin_api, operator_api
):
    task = new_task(agent_api)
    pause(admin_api)
    gate(agent_api, task["id"])
    admin_api.post("agents/agent-a/unpause", {"reason": "fixed"})

    resumed = operator_api.post(f"tasks/{task['id']}/resume", {"reason": "agent fixed"})

    assert resumed.status_code == 200
    assert (resumed.body["state"], resumed.body["phase"]) == ("RUNNING", 2)
    assert gate(agent_api, task["id"])["decision"] == "ALLOW"


def test_it_refuses_to_create_a_task_for_a_paused_agent(agent_api, admin_api):
    from agents.models import Task

    admin_api.post("agents/agent-a/pause", {"reason": "burning money"})

    response = agent_api.post("tasks", {"goal": "Close incident 42"})

    assert response.status_code == 409, response.body
    assert response.body["error"]["code"] == "AGENT_PAUSED"
    assert Task.objects.count() == 0


def test_a_repeated_pause_keeps_the_first_reason_and_writes_one_audit_row(admin_api, agent_api):
    assert pause(admin_api).status_code == 200
    again = pause(admin_api, reason="me too")
    assert again.status_code == 200
    assert again.body == {"name": "agent-a", "paused": True, "paused_reason": "burning money"}
    assert Event.objects.filter(kind="agent_paused").count() == 1


def test_a_secret_in_the_pause_reason_is_masked_in_the_operator_api(
    agent_api, admin_api, operator_api
):
    """The reason is an operator's note that every operator reads after: the API's answers mask
    it by the one redaction policy, as the console's agents page and the audit log do (it is
    stored as typed)."""
    secret = "sk-live-abcdefghijklmnopqrstuvwxyz123456"
    answer = pause(admin_api, reason=f"key leaked: {secret}")
    assert answer.status_code == 200
    assert Agent.objects.get(name="agent-a").paused_reason == f"key leaked: {secret}"
    shown = [answer.body["paused_reason"]]
    for api in (admin_api, operator_api):
        read = api.get("agents/agent-a")
        assert read.status_code == 200
        shown.append(read.body["paused_reason"])
    assert shown == ["key leaked: •••"] * 3
