"""Errors the framework raises before a view runs (content negotiation) answer the envelope
like every other error: a documented code and a message, and nothing counted."""

from __future__ import annotations

import pytest

from .helpers import get_task, new_task

pytestmark = pytest.mark.django_db


def assert_envelope(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    error = response.body["error"]
    assert set(error) == {"code", "message", "fields"}
    assert (error["code"], bool(error["message"].strip())) == (code, True), error
    return error


@pytest.mark.parametrize("fmt", ["x", "api", "yaml"])
def test_a_format_the_api_does_not_render_answers_not_found(agent_api, operator_api, fmt):
    task = new_task(agent_api)
    before = get_task(agent_api, task["id"])

    for api, method, path in (
        (operator_api, "get", "tasks"),
        (operator_api, "get", f"tasks/{task['id']}"),
        (operator_api, "get", "operations"),
        (agent_api, "post", f"tasks/{task['id']}/model-calls"),
    ):
        response = api._call(method, f"{path}?format={fmt}", {} if method == "post" else None)
        assert_envelope(response, 404, "NOT_FOUND")

    assert get_task(agent_api, task["id"]) == before  # the gate counted nothing


def test_an_accept_header_without_json_answers_not_acceptable(operator_api, client):
    response = client.get(
        "/api/v1/tasks",
        HTTP_AUTHORIZATION=f"Bearer {operator_api.token}",
        HTTP_ACCEPT="application/xml",
    )
    response.body = response.json()

    assert_envelope(response, 406, "NOT_ACCEPTABLE")
