"""A trailing slash works like none, and an unknown API path answers the JSON error envelope.

Clients (and DRF habits) add a slash: `POST /api/v1/tasks/` once answered Django's HTML 404.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_a_task_is_created_with_a_trailing_slash(agent_api):
    created = agent_api.post("tasks/", {"goal": "refund order 42"})

    assert created.status_code == 201, created.content[:300]
    assert created.body["goal"] == "refund order 42"


def test_every_endpoint_answers_the_same_with_a_trailing_slash(agent_api):
    task = agent_api.post("tasks", {"goal": "g"}).body

    gated = agent_api.post(f"tasks/{task['id']}/model-calls/", {"model": "m"})
    fetched = agent_api.get(f"tasks/{task['id']}/")

    assert gated.status_code == 200 and gated.body["decision"] == "ALLOW"
    assert fetched.status_code == 200 and fetched.body["id"] == task["id"]


def test_the_slash_does_not_bypass_authentication(client):
    response = client.post("/api/v1/tasks/", data="{}", content_type="application/json")

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize(
    "path", ["/api/v1/nothing-here", "/api/v1/nothing-here/", "/api/v1/tasks/x/y/z"]
)
def test_an_unknown_api_path_answers_a_json_404(agent_api, path):
    response = agent_api.post(path, {"goal": "g"})

    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.body["error"]["code"] == "NOT_FOUND"
    assert set(response.body["error"]) == {"code", "message", "fields"}


def test_the_schema_still_answers_at_its_own_address(client):
    assert client.get("/api/v1/schema/").status_code == 200
