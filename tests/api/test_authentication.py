"""Bearer tokens: a missing, unknown, malformed or revoked token answers 401."""

from __future__ import annotations

import pytest
from django.utils import timezone

from agents.models import ApiToken

from .helpers import new_task, row_counts

pytestmark = pytest.mark.django_db


def test_it_answers_401_without_a_token(client, agent_api):
    task = new_task(agent_api)
    before = row_counts()

    for response in (
        client.get("/api/v1/tasks"),
        client.get(f"/api/v1/tasks/{task['id']}"),
        client.post("/api/v1/tasks", {"goal": "x"}, content_type="application/json"),
        client.post(f"/api/v1/tasks/{task['id']}/model-calls", {}, content_type="application/json"),
        client.post(f"/api/v1/tasks/{task['id']}/stop", {}, content_type="application/json"),
    ):
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "UNAUTHENTICATED"
        assert response["WWW-Authenticate"] == "Bearer"

    assert row_counts() == before


@pytest.mark.parametrize(
    "header",
    ["Bearer lw_not-a-real-token", "Bearer ", "Token lw_abc", "lw_abc", "Basic dXNlcjpwdw=="],
)
def test_it_answers_401_to_a_bad_authorization_header(client, agent_api, header):
    response = client.get("/api/v1/tasks", HTTP_AUTHORIZATION=header)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHENTICATED"


def test_it_answers_401_to_a_revoked_token(agent_api):
    assert agent_api.get("tasks").status_code == 200
    ApiToken.objects.update(revoked_at=timezone.now())

    response = agent_api.get("tasks")

    assert response.status_code == 401


def test_it_answers_401_to_the_token_of_an_inactive_user(operator_api, django_user_model):
    django_user_model.objects.filter(username="olivia").update(is_active=False)

    assert operator_api.get("tasks").status_code == 401


def test_it_stores_only_the_hash_of_a_token(agent_api):
    token = ApiToken.objects.get(agent__name="agent-a")

    assert agent_api.token not in (token.key_hash, token.prefix)
    assert len(token.key_hash) == 64
