"""The OpenAPI schema: public, complete (every answer and every error), no looser than the
server, and free of drf-spectacular warnings (no operationId collisions)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command

from tests.live import ROOT

pytestmark = pytest.mark.django_db

JSON_INT_MAX = 2**53 - 1
ERROR_REF = "#/components/schemas/ErrorBody"


@pytest.fixture
def schema(client):
    response = client.get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def operations(schema):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            if method in {"get", "post", "patch", "put", "delete"}:
                yield f"{method.upper()} {path}", operation


def component(schema, name):
    return schema["components"]["schemas"][name]


def test_it_serves_the_openapi_schema_without_auth(client, schema):
    assert schema["openapi"].startswith("3.")
    for path in (
        "/api/v1/tasks",
        "/api/v1/tasks/{task_id}/tool-calls",
        "/api/v1/tasks/{task_id}/resume",
        "/api/v1/operations/{operation_id}/reconcile",
        "/api/v1/audit",
    ):
        assert path in schema["paths"], path
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"


def test_it_serves_the_docs_without_auth(client):
    response = client.get("/api/v1/docs/")

    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


def test_every_operation_describes_its_answer(schema):
    for label, operation in operations(schema):
        ok = {code: r for code, r in operation["responses"].items() if code.startswith("2")}
        assert ok, label
        for code, response in ok.items():
            if code == "204":
                continue
            assert "$ref" in str(response["content"]["application/json"]["schema"]), label


def test_every_operation_describes_its_errors_with_the_envelope(schema):
    for label, operation in operations(schema):
        for code in ("400", "401", "403", "404", "429"):
            response = operation["responses"].get(code)
            assert response is not None, f"{label} {code}"
            assert response["content"]["application/json"]["schema"]["$ref"] == ERROR_REF
    envelope = component(schema, "ErrorDetail")
    assert set(envelope["required"]) == {"code", "message", "fields"}


def test_every_decision_is_described(schema):
    described = str(schema)
    for decision in ("ALLOW", "EXECUTE", "REUSE", "BLOCK", "WAIT", "STOP", "CONTINUE"):
        assert f"{decision}: " in described, decision
    assert "DESIGN.md" not in described


def test_operation_ids_are_unique_and_named(schema):
    ids = [operation["operationId"] for _, operation in operations(schema)]

    assert len(ids) == len(set(ids))
    assert "task_list" in ids and "task_get" in ids


def test_generating_the_schema_gives_no_warning(tmp_path):
    # `--fail-on-warn` turns any warning (an operationId collision, an unnamed enum) into an error.
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"),
        stderr=StringIO(),
    )  # fmt: skip


def test_request_schemas_refuse_what_the_server_refuses(schema):
    create = component(schema, "TaskCreateInRequest")
    assert create["additionalProperties"] is False
    assert create["properties"]["goal"]["minLength"] == 1
    limits = component(schema, "LimitsInRequest")
    assert limits["type"] == "object"
    assert limits["additionalProperties"] is False
    assert limits["properties"]["max_cycle_period"]["minimum"] == 2
    tool = component(schema, "ToolRequestInRequest")
    assert tool["properties"]["args"]["type"] == "object"
    assert tool["properties"]["tool"]["minLength"] == 1
    for name, body in schema["components"]["schemas"].items():
        if name.endswith("Request") and body.get("type") == "object":
            assert body.get("additionalProperties") is False, name


def test_money_patterns_refuse_an_empty_amount(schema):
    patterns = re.findall(r"'pattern': '([^']*)'", str(schema))
    money = [p for p in patterns if "\\." in p and "[0-9]" in p and "{1,18}" not in p]

    assert money
    for pattern in money:
        assert not re.search(pattern.replace("\\\\", "\\"), ""), pattern


def test_no_integer_bound_is_beyond_what_json_keeps_exactly(schema):
    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "integer":
                yield node
            for value in node.values():
                yield from walk(value)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value)

    for name, body in schema["components"]["schemas"].items():
        if not name.endswith("Request"):
            continue
        for integer in walk(body):
            if name.startswith("ToolResultIn") and integer.get("minimum", 0) < 0:
                continue  # wait_ms: any wait is the guard's to judge, never a 400
            assert integer.get("maximum", 0) <= JSON_INT_MAX, (name, integer)


def test_a_body_that_must_name_something_is_required(schema):
    limits = schema["paths"]["/api/v1/tasks/{task_id}/limits"]["patch"]["requestBody"]
    create = schema["paths"]["/api/v1/tasks"]["post"]["requestBody"]

    assert limits["required"] is True
    assert create["required"] is True


# A fresh process (drf-spectacular loads its extensions' target classes on the first schema
# request, and keeps them), whose first schema requests all come at once.
_FIRST_REQUESTS_AT_ONCE = """
import threading
import django
django.setup()
from django.test import Client
barrier = threading.Barrier(8)
codes = []
def get():
    client = Client(raise_request_exception=False)
    barrier.wait()
    codes.append(client.get("/api/v1/schema/").status_code)
threads = [threading.Thread(target=get) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(sorted(codes))
"""


@pytest.mark.slow  # Python processes
def test_concurrent_first_schema_requests_all_get_the_schema():
    # gunicorn's threaded workers serve a fresh process's first requests side by side; in
    # drf-spectacular they raced (AttributeError in its lazy class loading: a 500).
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "loopwarden.settings",
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_REQUESTS_AT_ONCE], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == str([200] * 8), done.stderr[-3000:]


def test_an_operation_key_s_schema_refuses_what_the_server_refuses(schema):
    """`operation_key` is `not` a pattern (unanchored: ECMA-262 and Python read it alike) that
    finds any character the server refuses in a key."""
    key = component(schema, "ToolRequestInRequest")["properties"]["operation_key"]
    assert (key["type"], key["maxLength"]) == ("string", 300)
    refused = re.compile(key["not"]["pattern"])
    for taken in ("pay-café-1", "支払い-1", "платёж 1", " ", ""):
        assert not refused.search(taken), taken
    for sent in ("pay\u200b-1", "pay-1\n", "\u202epay", "pay\x00", "pay\U000e0041"):
        assert refused.search(sent), sent


def test_every_decision_that_takes_a_request_id_may_answer_409(schema):
    """The same request_id with another request answers 409 REQUEST_ID_REUSED."""
    taking = [
        (label, operation)
        for label, operation in operations(schema)
        if "request_id" in str(operation.get("requestBody", ""))
        or "request_id" in _body_properties(schema, operation)
    ]
    assert len(taking) >= 6  # five decisions and the stop
    for label, operation in taking:
        assert "409" in operation["responses"], label


def _body_properties(schema, operation) -> set[str]:
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    ref = content.get("schema", {}).get("$ref", "")
    return set(component(schema, ref.rsplit("/", 1)[-1]).get("properties", {})) if ref else set()
