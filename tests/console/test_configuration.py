"""agents/services/configuration.py: the one road for profiles and tokens, from the console and
the API."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from agents.errors import BadInput, NotFound
from agents.models import ApiToken, Event, LimitProfile
from agents.services import configuration


def test_profile_save_creates_with_defaults_and_logs(people):
    values = {"name": "p1", "max_cost": "2.5"}
    profile = configuration.profile_save(user=people.admin, values=values)
    assert (profile.max_cost, profile.max_model_calls) == (Decimal("2.5"), 20)
    event = Event.objects.get(kind="profile_created")
    assert event.detail["fields"]["max_cost"] == "2.500000"


def test_profile_save_reports_every_bad_field_and_changes_nothing(people):
    with pytest.raises(BadInput) as caught:
        bad = {"max_polls": -1, "repeat_action": "nag", "colour": 1}
        configuration.profile_save(user=people.admin, name="default", values=bad)
    assert set(caught.value.fields) == {"max_polls", "repeat_action", "colour"}
    assert LimitProfile.objects.get(name="default").max_polls == 10
    assert not Event.objects.filter(kind="profile_changed").exists()


def test_profile_save_of_a_missing_profile_is_not_found(people):
    with pytest.raises(NotFound):
        configuration.profile_save(user=people.admin, name="ghost", values={"max_polls": 1})


def test_token_issue_and_revoke(people, agent):
    token, raw = configuration.token_issue(agent_name=agent.name, user=people.admin, name="n")
    assert token.key_hash != raw and raw.startswith(token.prefix)
    configuration.token_revoke(token_id=token.pk, user=people.admin)
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    with pytest.raises(NotFound):
        configuration.token_issue(agent_name="ghost", user=people.admin)


def test_the_api_creates_and_changes_profiles_through_the_same_service(make_user, client):
    _, token = make_user("root", admin=True)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}", "content_type": "application/json"}
    created = client.post("/api/v1/profiles", json.dumps({"name": "api-made", "max_polls": 4}),
                          **auth)  # fmt: skip
    assert created.status_code == 201, created.content
    changed = client.patch("/api/v1/profiles/api-made", json.dumps({"max_polls": 6}), **auth)
    assert changed.status_code == 200
    assert changed.json()["max_polls"] == 6
    kinds = list(Event.objects.order_by("id").values_list("kind", "actor"))
    assert kinds[-2:] == [("profile_created", "user:root"), ("profile_changed", "user:root")]
    bad = client.patch("/api/v1/profiles/api-made", json.dumps({"max_cycle_period": 1}), **auth)
    assert bad.status_code == 400
