"""Bodies are bounded in size and depth by settings, and answer the error envelope.

`LOOPWARDEN_MAX_BODY_BYTES` (413 `BODY_TOO_LARGE`) and `LOOPWARDEN_MAX_JSON_DEPTH` (400
`BODY_TOO_DEEP`): neither a huge body nor a deeply nested one reaches a serializer, the
fingerprint or the database, and neither answers Django's HTML error page or a 500.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from agents.models import ToolPolicy

from .helpers import new_task, request_tool, row_counts

pytestmark = pytest.mark.django_db


def nested(depth: int, leaf=1):
    """`depth` objects inside each other: {"a": {"a": ... leaf}}."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_text(depth: int) -> str:
    """The same as JSON text, built without recursion (json.dumps would overflow first)."""
    return '{"a":' * depth + "1" + "}" * depth


def assert_envelope(response, status: int, code: str) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    error = json.loads(response.content)["error"]
    assert set(error) == {"code", "message", "fields"}
    assert error["code"] == code, error
    return error


def test_the_limits_are_settings_with_documented_defaults():
    assert settings.LOOPWARDEN_MAX_BODY_BYTES == 2_621_440
    assert settings.LOOPWARDEN_MAX_JSON_DEPTH == 64
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == settings.LOOPWARDEN_MAX_BODY_BYTES


# --- size ------------------------------------------------------------------------------------


def test_a_body_over_the_default_limit_answers_413_with_the_envelope(agent_api):
    task = new_task(agent_api)
    before = row_counts()
    big = json.dumps({"tool": "search", "args": {"blob": "x" * 2_700_000}, "effect": "read"})

    response = agent_api.post(f"tasks/{task['id']}/tool-calls", raw=big)

    error = assert_envelope(response, 413, "BODY_TOO_LARGE")
    assert "2621440" in error["message"]
    assert row_counts() == before


def test_the_size_limit_follows_the_setting(agent_api, settings):
    settings.LOOPWARDEN_MAX_BODY_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_000
    task = new_task(agent_api)

    small = request_tool(agent_api, task["id"], "search", {"blob": "x" * 1_000})
    assert small["decision"] == "EXECUTE"
    response = agent_api.post(
        f"tasks/{task['id']}/tool-calls",
        {"tool": "search", "args": {"blob": "x" * 3_000}, "effect": "read"},
    )
    assert_envelope(response, 413, "BODY_TOO_LARGE")


def test_a_large_result_body_is_refused_before_it_is_recorded(agent_api, settings):
    """413 is the one answer a result can get before it is read: the client must shrink it."""
    settings.LOOPWARDEN_MAX_BODY_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_000
    task = new_task(agent_api)
    asked = request_tool(agent_api, task["id"], "search", {"q": "x"})

    response = agent_api.post(
        f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result",
        {"kind": "SUCCESS", "data": "x" * 3_000},
    )

    assert_envelope(response, 413, "BODY_TOO_LARGE")


# --- depth -----------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 472])
def test_args_nested_too_deep_answer_400_and_record_nothing(agent_api, depth):
    task = new_task(agent_api)
    before = row_counts()

    response = agent_api.post(
        f"tasks/{task['id']}/tool-calls",
        {"tool": "search", "args": nested(depth), "effect": "read"},
    )

    error = assert_envelope(response, 400, "BODY_TOO_DEEP")
    assert "64" in error["message"]
    assert row_counts() == before


@pytest.mark.parametrize("path", ["tasks", "tasks/{task}/tool-calls", "tasks/{task}/finish"])
def test_a_body_nested_ten_thousand_levels_answers_400(agent_api, path):
    task = new_task(agent_api)

    response = agent_api.post(path.replace("{task}", task["id"]), raw=nested_text(10_000))

    assert_envelope(response, 400, "BODY_TOO_DEEP")


def test_a_list_nested_ten_thousand_levels_answers_400(agent_api):
    response = agent_api.post("tasks", raw="[" * 10_000 + "]" * 10_000)

    assert_envelope(response, 400, "BODY_TOO_DEEP")


def test_a_result_nested_too_deep_answers_400_and_the_call_stays_open(agent_api):
    task = new_task(agent_api)
    asked = request_tool(agent_api, task["id"], "search", {"q": "x"})

    response = agent_api.post(
        f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result",
        {"kind": "SUCCESS", "data": nested(500)},
    )

    assert_envelope(response, 400, "BODY_TOO_DEEP")


def test_args_at_the_depth_limit_are_fingerprinted(agent_api):
    """The body is depth 1, `args` depth 2: args may nest 62 more objects inside."""
    ToolPolicy.objects.create(tool="search", ignore_fields=["a.a.request_id"])
    task = new_task(agent_api)

    first = request_tool(agent_api, task["id"], "search", nested(62))
    second = request_tool(agent_api, task["id"], "search", nested(62, leaf=2))

    assert first["decision"] == "EXECUTE"
    assert second["decision"] == "EXECUTE"
    assert first["fingerprint"] != second["fingerprint"]


def test_the_deepest_configurable_limit_still_fingerprints(agent_api, settings):
    """The setting is capped so that what it admits never recurses too deep downstream."""
    ceiling = settings.LOOPWARDEN_MAX_JSON_DEPTH_CEILING
    settings.LOOPWARDEN_MAX_JSON_DEPTH = ceiling
    ToolPolicy.objects.create(tool="search", ignore_fields=["a.a.request_id"])
    task = new_task(agent_api)

    deepest = request_tool(agent_api, task["id"], "search", nested(ceiling - 1))
    assert deepest["decision"] == "EXECUTE"
    response = agent_api.post(
        f"tasks/{task['id']}/tool-calls",
        {"tool": "search", "args": nested(ceiling), "effect": "read"},
    )
    assert_envelope(response, 400, "BODY_TOO_DEEP")


# --- settings parsing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, value",
    [
        ("LOOPWARDEN_MAX_JSON_DEPTH", "100000"),
        ("LOOPWARDEN_MAX_JSON_DEPTH", "deep"),
        ("LOOPWARDEN_MAX_BODY_BYTES", "2.5MB"),
    ],
)
def test_a_bad_limit_stops_the_start_with_a_clear_message(name, value):
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "loopwarden.settings", name: value},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode != 0
    assert name in result.stderr
