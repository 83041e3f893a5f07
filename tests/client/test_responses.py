"""Reading the server's answers: error envelopes, non-API errors and STOP, from real responses.

These are the client's pure helpers, fed with what a live server actually sent.
"""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest
from loopwarden_client import LoopwardenError, TaskStopped
from loopwarden_client._core import Request, error_from_response, parse_response, unwrap_items

from agents.guard import terms


@pytest.fixture
def http(api_url, agent_token):
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {agent_token}"}) as c:
        yield c


def test_a_bad_envelope_becomes_a_loopwarden_error_with_its_fields(http):
    response = http.post("tasks", json={"goal": 7, "limits": "none"})
    error = error_from_response(response)
    assert (error.status, error.code) == (400, "INVALID_FIELDS")
    assert set(error.fields) == {"goal", "limits"}
    assert error.message.startswith("Invalid request:")


def test_an_unknown_token_is_an_unauthenticated_error(api_url):
    response = httpx.get(api_url + "tasks", headers={"Authorization": "Bearer lw_nope"})
    error = error_from_response(response)
    assert (error.status, error.code, error.message) == (
        401,
        "UNAUTHENTICATED",
        "Unknown or revoked token.",
    )


def test_an_error_page_without_envelope_gets_an_http_code(live_server):
    response = httpx.get(f"{live_server.url}/no-such-page-at-all/")
    error = error_from_response(response)
    assert (error.status, error.code) == (404, "HTTP_404")
    assert error.message  # the page's text, cut short


def test_a_framework_default_detail_body_is_read_too():
    # Not something this server sends (its handler always wraps errors), but a proxy or an
    # older server might; built by hand because nothing here can produce it.
    error = error_from_response(httpx.Response(401, json={"detail": "No token."}))
    assert (error.code, error.message) == ("HTTP_401", "No token.")


def test_a_stop_raises_task_stopped_only_on_guard_endpoints(http, lw):
    task_id = lw.create_task("stopped")["id"]
    lw.stop(task_id)
    response = http.post(f"tasks/{task_id}/tool-calls", json={"tool": "t", "args": {},
                                                               "effect": "read"})  # fmt: skip
    guard = Request("request_tool", "POST", "x", {"tool": "t"}, task_id=task_id, stop_raises=True)
    seen = []
    with pytest.raises(TaskStopped) as caught:
        parse_response(guard, response, lambda *args: seen.append(args))
    assert caught.value.report == response.json()["report"]
    assert (caught.value.state, caught.value.reason) == (terms.STOPPED, "agent_stop")
    assert seen[0][2]["decision"] == terms.STOP  # the hook saw it before the raise
    plain = parse_response(Request("get_task", "GET", "x"), response)
    assert plain["decision"] == terms.STOP


def test_list_answers_are_unwrapped_whether_wrapped_or_bare(http, lw):
    lw.create_task("listed")
    assert len(unwrap_items(http.get("tasks").json(), "tasks", 200)) == 1
    assert unwrap_items([{"id": 1}], "operations", 200) == [{"id": 1}]
    assert unwrap_items({"results": [{"id": 2}]}, "operations", 200) == [{"id": 2}]
    with pytest.raises(LoopwardenError):
        unwrap_items({"count": 0}, "tasks", 200)


def test_the_client_imports_without_django_and_without_the_repository(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = (
        "import sys, loopwarden_client; assert 'django' not in sys.modules; "
        "assert 'site-packages' in loopwarden_client.__file__ or "
        "'clients/python/src' in loopwarden_client.__file__"
    )
    subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, env=env, check=True)
