"""PATCH tasks/{id}/limits: an admin changes one task's limits; usage stays."""

from __future__ import annotations

from datetime import datetime

import pytest

from agents.models import Event

from .helpers import assert_stopped, gate, get_task, new_task, row_counts, settle

pytestmark = pytest.mark.django_db


def test_it_lets_an_admin_raise_a_running_tasks_limits(agent_api, admin_api):
    task = new_task(agent_api, limits={"max_model_calls": 1})
    settle(agent_api, task["id"], gate(agent_api, task["id"])["model_call"])

    response = admin_api.patch(
        f"tasks/{task['id']}/limits", {"max_model_calls": 3, "reason": "long incident"}
    )

    assert response.status_code == 200, response.body
    assert response.body["limits"]["max_model_calls"] == 3
    assert response.body["usage"]["model_calls"] == 1
    event = Event.objects.get(task_id=task["id"], kind="limits_changed")
    assert event.detail == {"before": {"max_model_calls": 1}, "after": {"max_model_calls": 3}}
    assert (event.actor, event.reason) == ("user:adam", "long incident")
    assert gate(agent_api, task["id"])["decision"] == "ALLOW"


def test_it_lets_an_admin_tighten_a_task_so_the_next_call_stops(agent_api, admin_api):
    task = new_task(agent_api)
    settle(agent_api, task["id"], gate(agent_api, task["id"])["model_call"])

    admin_api.patch(f"tasks/{task['id']}/limits", {"max_model_calls": 1})

    assert_stopped(gate(agent_api, task["id"]), "PARTIAL", "model_budget", "GUARD_ROUND_LIMIT")


def test_it_moves_the_deadline_with_deadline_seconds(agent_api, admin_api):
    task = new_task(agent_api)

    body = admin_api.patch(f"tasks/{task['id']}/limits", {"deadline_seconds": 1900}).body

    moved = datetime.fromisoformat(body["deadline_at"]) - datetime.fromisoformat(
        task["deadline_at"]
    )
    assert moved.total_seconds() == 1000


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"max_model_calls": "50"},
        {"max_model_calls": True},
        {"max_model_calls": 0},
        {"max_cost": [1]},
        {"repeat_action": "ignore"},
        {"near_duplicate_threshold": 2},
        {"max_tasks": 5},
        {"max_model_calls": 5, "reason": 7},
        {"max_model_calls": -1},
        {"max_model_calls": 5.0},
        {"max_cost": None},
        {"deadline_seconds": 2**31},
        {"max_tasks_per_trigger": 3},
    ],
    ids=[
        "nothing",
        "text for int",
        "bool for int",
        "zero",
        "list for money",
        "unknown choice",
        "threshold above 1",
        "unknown limit",
        "reason not text",
        "negative",
        "float for int",
        "null money",
        "past its column",
        "profile-only limit",
    ],
)
def test_it_refuses_invalid_limits_and_changes_nothing(agent_api, admin_api, body):
    task = new_task(agent_api)
    before = row_counts()

    response = admin_api.patch(f"tasks/{task['id']}/limits", body)

    assert response.status_code == 400, response.body
    assert set(response.body["error"]) == {"code", "message", "fields"}
    assert response.body["error"]["fields"]
    assert row_counts() == before
    assert get_task(agent_api, task["id"])["limits"] == task["limits"]


def test_a_tasks_limits_change_leaves_its_profile_and_the_next_task_alone(agent_api, admin_api):
    task = new_task(agent_api)
    profile = admin_api.get("profiles/default").body

    changed = admin_api.patch(
        f"tasks/{task['id']}/limits", {"max_model_calls": 50, "max_cost": "9.50"}
    )

    assert changed.status_code == 200, changed.body
    assert admin_api.get("profiles/default").body == profile
    assert new_task(agent_api)["limits"] == task["limits"]
