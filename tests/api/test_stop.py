"""Stopping a task: by an operator, by its own agent; idempotent, report stored once."""

from __future__ import annotations

import pytest

from agents.models import Event

from .helpers import assert_stop_is_sticky, assert_stopped, execute, gate, get_task, new_task

pytestmark = pytest.mark.django_db


def test_it_stops_a_task_for_an_operator(agent_api, operator_api):
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "a"})

    response = operator_api.post(f"tasks/{task['id']}/stop", {"reason": "runaway"})

    assert response.status_code == 200
    stop_report = assert_stopped(response.body, "STOPPED", "operator_stop", "GUARD_STOPPED")
    assert stop_report["usage"]["tool_executions"] == 1
    event = Event.objects.get(task_id=task["id"], kind="stop_requested")
    assert (event.actor, event.reason) == ("user:olivia", "runaway")
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_stops_a_task_for_its_own_agent(agent_api):
    task = new_task(agent_api)

    response = agent_api.post(f"tasks/{task['id']}/stop", {"reason": "user cancelled"})

    assert response.status_code == 200
    assert_stopped(response.body, "STOPPED", "agent_stop", "GUARD_STOPPED")
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_answers_a_repeated_request_id_with_the_same_task(agent_api, operator_api):
    task = new_task(agent_api)
    body = {"reason": "runaway", "request_id": "op-req-1"}
    first = operator_api.post(f"tasks/{task['id']}/stop", body)
    events = Event.objects.count()

    again = operator_api.post(f"tasks/{task['id']}/stop", body)

    assert again.status_code == 200
    assert again.body == first.body
    assert Event.objects.count() == events
    assert Event.objects.filter(task_id=task["id"], kind="task_stopped").count() == 1


def test_it_keeps_the_first_stop_when_stopped_again(agent_api, operator_api):
    task = new_task(agent_api)
    first = agent_api.post(f"tasks/{task['id']}/stop", {"request_id": "a-1"}).body

    later = operator_api.post(f"tasks/{task['id']}/stop", {"reason": "me too", "request_id": "o-1"})

    assert later.status_code == 200
    assert later.body["reason"] == "agent_stop"
    assert later.body["report"] == first["report"]
    assert Event.objects.filter(task_id=task["id"], kind="task_stopped").count() == 1


def test_it_stores_the_report_once_and_returns_it_unchanged(agent_api, operator_api):
    task = new_task(agent_api)
    stopped = operator_api.post(f"tasks/{task['id']}/stop", {"reason": "x"}).body
    stored = stopped["report"]
    assert stored["usage"]["model_calls"] == 0
    assert stored["phase"] == 1
    assert stored["at"].endswith("Z")

    assert_stop_is_sticky(agent_api, task["id"])
    operator_api.post(f"tasks/{task['id']}/stop", {"reason": "again"})
    # A late usage report moves the task's usage, never the stored report.
    assert get_task(agent_api, task["id"])["report"] == stored
    assert gate(agent_api, task["id"])["report"] == stored
    assert operator_api.get(f"tasks/{task['id']}").body["report"] == stored


def test_it_does_not_stop_a_completed_task(agent_api, operator_api):
    task = new_task(agent_api)
    agent_api.post(f"tasks/{task['id']}/finish", {"evidence": {"revision": 1, "done": True}})

    response = operator_api.post(f"tasks/{task['id']}/stop", {"reason": "late"})

    assert response.status_code == 200
    assert (response.body["state"], response.body["reason"]) == ("COMPLETED", "goal_met")


def test_it_requires_an_operators_reason_and_changes_nothing_without_one(agent_api, operator_api):
    # docs/DESIGN.md: the operator's stop takes `reason` (the agent's `reason?`); the console asks
    # for one too. A person's stop without a why leaves an audit entry nobody can act on.
    task = new_task(agent_api)

    for body in ({}, {"reason": ""}, {"reason": "   "}):
        response = operator_api.post(f"tasks/{task['id']}/stop", body)
        assert response.status_code == 400, (body, response.body)
        assert response.body["error"]["code"] == "REASON_REQUIRED"
        assert response.body["error"]["fields"] == {"reason": "required"}

    assert get_task(agent_api, task["id"])["state"] == "RUNNING"
    assert not Event.objects.filter(task_id=task["id"], kind="stop_requested").exists()
