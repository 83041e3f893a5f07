"""Limit profiles: admins create, change and delete them; tasks copy them at creation."""

from __future__ import annotations

import pytest

from agents.models import Event, LimitProfile
from tests.conftest import allow_profiles

from .helpers import new_task

pytestmark = pytest.mark.django_db


def test_it_lets_an_admin_create_a_profile_that_tasks_copy(admin_api, agent_api):
    response = admin_api.post(
        "profiles",
        {"name": "tight", "max_model_calls": 3, "max_cost": "0.50", "repeat_action": "stop"},
    )

    assert response.status_code == 201, response.body
    assert response.body["name"] == "tight"
    assert response.body["max_model_calls"] == 3
    assert admin_api.patch("agents/agent-a", {"allowed_profiles": ["tight"]}).status_code == 200
    task = new_task(agent_api, profile="tight")
    assert task["profile"] == "tight"
    assert task["limits"]["max_model_calls"] == 3
    assert task["limits"]["repeat_action"] == "stop"
    assert task["limits"]["max_tool_executions"] == 20
    assert Event.objects.filter(kind="profile_created").count() == 1


def test_it_lets_an_admin_read_change_and_delete_a_profile(admin_api, agent_api):
    LimitProfile.objects.create(name="tight", max_model_calls=3)
    allow_profiles("agent-a", "tight")
    task = new_task(agent_api, profile="tight")

    assert admin_api.get("profiles/tight").body["max_model_calls"] == 3
    changed = admin_api.patch("profiles/tight", {"max_model_calls": 4})
    assert changed.status_code == 200, changed.body
    assert changed.body["max_model_calls"] == 4
    assert "tight" in [p["name"] for p in admin_api.get("profiles").body["profiles"]]
    deleted = admin_api.delete("profiles/tight")
    assert deleted.status_code == 204
    assert admin_api.get("profiles/tight").status_code == 404

    # A task keeps the limits it copied.
    body = agent_api.get(f"tasks/{task['id']}").body
    assert body["limits"]["max_model_calls"] == 3
    assert body["profile"] is None


def test_it_refuses_an_invalid_profile(admin_api):
    before = LimitProfile.objects.count()
    for body in (
        {"name": "bad", "max_model_calls": 0},
        {"name": "bad", "max_stagnant": "x"},
        {"name": "bad", "near_duplicate_threshold": 1.5},
        {"max_model_calls": 3},
    ):
        response = admin_api.post("profiles", body)
        assert response.status_code == 400, (body, response.body)
        assert response.body["error"]["fields"]

    assert LimitProfile.objects.count() == before


def test_it_refuses_a_threshold_no_float_holds_and_changes_nothing(admin_api):
    """A JSON integer too large for a float (400 digits: JSON numbers have no bound) is a
    400 naming the threshold, on creation and on change, never a 500."""
    huge = "1" + "0" * 400
    profiles = list(LimitProfile.objects.values())

    created = admin_api._call(
        "post", "profiles", raw=f'{{"name": "huge", "near_duplicate_threshold": {huge}}}'
    )
    changed = admin_api._call(
        "patch", "profiles/default", raw=f'{{"near_duplicate_threshold": -{huge}}}'
    )

    for response in (created, changed):
        assert response.status_code == 400, response.content[:300]
        assert list(response.body["error"]["fields"]) == ["near_duplicate_threshold"]
    assert list(LimitProfile.objects.values()) == profiles


def test_it_refuses_a_duplicate_profile_name(admin_api):
    LimitProfile.objects.create(name="tight", max_model_calls=3)

    response = admin_api.post("profiles", {"name": "tight", "max_model_calls": 9})

    assert response.status_code == 409
    assert "name" in response.body["error"]["fields"]
    assert LimitProfile.objects.get(name="tight").max_model_calls == 3


def test_it_lets_an_agent_only_tighten_its_profile(agent_api):
    LimitProfile.objects.create(name="tight", max_model_calls=3)
    allow_profiles("agent-a", "tight")

    looser = agent_api.post(
        "tasks", {"goal": "x", "profile": "tight", "limits": {"max_model_calls": 4}}
    )
    tighter = agent_api.post(
        "tasks", {"goal": "x", "profile": "tight", "limits": {"max_model_calls": 2}}
    )

    assert looser.status_code == 403
    assert looser.body["error"]["code"] == "LIMITS_NOT_ALLOWED"
    assert "limits.max_model_calls" in looser.body["error"]["fields"]
    assert tighter.status_code == 201
    assert tighter.body["limits"]["max_model_calls"] == 2


def test_it_refuses_an_unknown_profile_at_task_creation(agent_api):
    # Like any profile the agent was not granted (docs/DESIGN.md section 6): whether it exists or
    # not is not the agent's business.
    response = agent_api.post("tasks", {"goal": "x", "profile": "nope"})

    assert response.status_code == 403
    assert response.body["error"]["code"] == "PROFILE_NOT_ALLOWED"


def test_the_api_and_the_console_refuse_a_profile_with_one_validator(admin_api):
    """The API's serializer hands the profile to `validate_profile`, the validator the
    console's form reaches through the same service: one sentence per mistake."""
    from agents.errors import BadInput
    from agents.services import configuration

    body = {"name": "not a slug", "max_model_calls": 0, "max_stagnant": "x"}
    response = admin_api.post("profiles", body)
    with pytest.raises(BadInput) as exc:
        configuration.validate_profile(body, creating=True)
    assert response.status_code == 400
    assert response.body["error"]["code"] == "INVALID_FIELDS"  # the API's code for a field
    assert response.body["error"]["fields"] == exc.value.fields
    assert exc.value.fields["max_model_calls"] == "Must be at least 1."
