"""An outer workflow restarting the task: task creation per trigger_key is rate-limited."""

from __future__ import annotations

import pytest

from agents.models import Event, LimitProfile, Task
from tests.conftest import allow_profiles

from .helpers import new_task

pytestmark = pytest.mark.django_db


def test_it_answers_429_past_five_tasks_for_one_trigger(agent_api):
    for _ in range(5):
        new_task(agent_api, trigger_key="ticket-42")

    response = agent_api.post("tasks", {"goal": "again", "trigger_key": "ticket-42"})

    assert response.status_code == 429
    assert response.body["error"]["code"] == "TRIGGER_LOOP"
    assert "ticket-42" in response.body["error"]["message"]
    assert Task.objects.filter(trigger_key="ticket-42").count() == 5
    assert Event.objects.filter(kind="trigger_loop").count() == 1


def test_it_counts_each_trigger_key_on_its_own(agent_api):
    for _ in range(5):
        new_task(agent_api, trigger_key="ticket-42")

    assert agent_api.post("tasks", {"goal": "x", "trigger_key": "ticket-43"}).status_code == 201
    assert agent_api.post("tasks", {"goal": "x"}).status_code == 201


def test_it_counts_each_agent_on_its_own(agent_api, other_agent_api):
    for _ in range(5):
        new_task(agent_api, trigger_key="ticket-42")

    assert (
        other_agent_api.post("tasks", {"goal": "x", "trigger_key": "ticket-42"}).status_code == 201
    )


def test_it_takes_the_limit_from_the_profile(agent_api):
    LimitProfile.objects.create(name="one-shot", max_tasks_per_trigger=1)
    allow_profiles("agent-a", "one-shot")
    new_task(agent_api, profile="one-shot", trigger_key="ticket-42")

    response = agent_api.post(
        "tasks", {"goal": "x", "profile": "one-shot", "trigger_key": "ticket-42"}
    )

    assert response.status_code == 429
    assert response.body["error"]["code"] == "TRIGGER_LOOP"


def test_it_forgets_tasks_older_than_the_window(agent_api):
    for _ in range(5):
        new_task(agent_api, trigger_key="ticket-42")
    from datetime import timedelta

    from django.utils import timezone

    Task.objects.update(created_at=timezone.now() - timedelta(hours=2))

    assert agent_api.post("tasks", {"goal": "x", "trigger_key": "ticket-42"}).status_code == 201
