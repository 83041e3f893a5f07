"""The OpenAPI schema and its browsable docs are public."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_it_serves_the_openapi_schema_without_auth(client):
    response = client.get("/api/v1/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    for path in (
        "/api/v1/tasks",
        "/api/v1/tasks/{task_id}/tool-calls",
        "/api/v1/tasks/{task_id}/resume",
        "/api/v1/operations/{operation_id}/reconcile",
    ):
        assert path in schema["paths"], path
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


def test_it_serves_the_docs_without_auth(client):
    response = client.get("/api/v1/docs/")

    assert response.status_code == 200
    assert b"swagger" in response.content.lower()
