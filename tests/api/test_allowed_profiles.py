"""An agent may only use its default profile and the ones an admin granted it (issue 8, hole 3):
naming any other one cannot loosen its own guard."""

from __future__ import annotations

import pytest

from agents.models import Event, LimitProfile, Task

from .helpers import new_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def loose(db):
    return LimitProfile.objects.create(name="loose", max_model_calls=100_000)


def test_it_refuses_a_profile_the_agent_was_not_granted(agent_api, loose):
    response = agent_api.post("tasks", {"goal": "x", "profile": "loose"})

    assert response.status_code == 403, response.body
    assert response.body["error"]["code"] == "PROFILE_NOT_ALLOWED"
    assert Task.objects.count() == 0


def test_it_lets_an_admin_grant_a_profile_through_the_api(agent_api, admin_api, loose):
    response = admin_api.patch("agents/agent-a", {"allowed_profiles": ["loose"]})

    assert response.status_code == 200, response.body
    assert response.body["allowed_profiles"] == ["loose"]
    task = new_task(agent_api, profile="loose")
    assert task["profile"] == "loose"
    assert task["limits"]["max_model_calls"] == 100_000
    assert Event.objects.filter(kind="agent_profiles_changed").count() == 1


def test_it_shows_an_agents_allowed_profiles(admin_api, agent, loose):
    _, row = agent
    row.allowed_profiles.add(loose)

    body = admin_api.get("agents/agent-a").body

    assert body["allowed_profiles"] == ["loose"]
    assert body["default_profile"] is None


def test_it_always_allows_the_agents_default_profile(agent_api, agent, loose):
    _, row = agent
    row.default_profile = loose
    row.save()

    assert new_task(agent_api, profile="loose")["profile"] == "loose"
    assert new_task(agent_api)["profile"] == "loose"


def test_it_refuses_a_grant_by_an_operator(operator_api, agent, loose):
    response = operator_api.patch("agents/agent-a", {"allowed_profiles": ["loose"]})

    assert response.status_code == 403
    assert not agent[1].allowed_profiles.exists()


def test_it_refuses_to_grant_an_unknown_profile(admin_api, agent):
    response = admin_api.patch("agents/agent-a", {"allowed_profiles": ["nope"]})

    assert response.status_code == 400
    assert "allowed_profiles" in response.body["error"]["fields"]


def test_a_patch_without_allowed_profiles_changes_nothing(admin_api, agent, loose):
    _, row = agent
    row.allowed_profiles.add(loose)
    events = Event.objects.count()

    response = admin_api.patch("agents/agent-a", {})

    assert response.status_code == 200, response.body
    assert response.body["allowed_profiles"] == ["loose"]
    assert Event.objects.count() == events
    response = admin_api.patch("agents/agent-a", {"reason": "checking"})
    assert response.status_code == 200, response.body


def test_an_empty_list_takes_every_granted_profile_back(admin_api, agent, loose):
    # On PostgreSQL the profiles are held FOR KEY SHARE: an empty list holds none (it was a
    # 500, EmptyResultSet, which schemathesis found).
    _, row = agent
    row.allowed_profiles.add(loose)

    response = admin_api.patch("agents/agent-a", {"allowed_profiles": [], "reason": "0" * 2000})

    assert response.status_code == 200, response.body
    assert response.body["allowed_profiles"] == []
