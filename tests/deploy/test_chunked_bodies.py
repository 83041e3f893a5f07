"""A body sent chunked is read like any other, or refused 411; never taken as empty.

With `Transfer-Encoding: chunked` there is no Content-Length, and Django reads a body by its
Content-Length alone: an empty finish once ended a task PARTIAL/goal_unverified for good, a
gate with a wrong-typed field answered ALLOW, a task with its goal answered "goal required".
gunicorn (how the app is deployed and how `./dev run` serves it) ends its input at the end of
the chunked body, so the body is read; Django's own server (pytest-django's `live_server`,
`manage.py runserver`) does not, so it answers 411 and closes the connection.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx
import pytest
from django.db import connection

from agents.models import Task
from tests.live import database_url, gunicorn_server
from tests.raw_http import exchange, request

# Slow (gunicorn processes): `./dev test` leaves it out, CI runs it.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def gunicorn(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    with gunicorn_server(
        database_url=url,
        workers=1,
        threads=4,
        env={"LOOPWARDEN_MAX_BODY_BYTES": str(LIMIT), "DB_CONN_MAX_AGE": "0"},
    ) as server:
        yield server


def _post(url: str, path: str, token: str, body: dict | bytes, **options):
    payload = body if isinstance(body, bytes) else json.dumps(body).encode()
    raw = request(
        "POST", f"/api/v1/{path}", host=urlsplit(url).netloc, body=payload, chunk=True,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )  # fmt: skip
    return exchange(url, raw, **options)


def _task(url: str, token: str) -> str:
    headers = {"Authorization": f"Bearer {token}"}
    answer = httpx.post(f"{url}/api/v1/tasks", json={"goal": "chunked"}, headers=headers)
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def test_a_chunked_finish_with_done_evidence_completes_the_task(gunicorn, make_agent):
    _, token = make_agent("chunky", namespace="ns-chunky")
    task = _task(gunicorn.url, token)

    answer = _post(gunicorn.url, f"tasks/{task}/finish", token,
                   {"evidence": {"revision": 0, "done": True}})  # fmt: skip

    assert answer.status == 200, answer.describe()
    assert (answer.json["state"], answer.json["reason"]) == ("COMPLETED", "goal_met")


def test_a_chunked_gate_with_a_wrong_typed_field_is_refused(gunicorn, make_agent):
    _, token = make_agent("chunky", namespace="ns-chunky")
    task = _task(gunicorn.url, token)

    answer = _post(gunicorn.url, f"tasks/{task}/model-calls", token, {"est_prompt_tokens": "many"})

    assert answer.status == 400, answer.describe()
    assert answer.envelope["error"]["code"] == "INVALID_FIELDS"
    assert "est_prompt_tokens" in answer.envelope["error"]["fields"]
    assert Task.objects.get(id=task).model_calls == 0


def test_a_chunked_task_keeps_its_goal(gunicorn, make_agent):
    _, token = make_agent("chunky", namespace="ns-chunky")

    answer = _post(gunicorn.url, "tasks", token, {"goal": "sent in chunks"})

    assert answer.status == 201, answer.describe()
    assert Task.objects.get(id=answer.json["id"]).goal == "sent in chunks"


def test_a_chunked_body_over_the_limit_answers_413_and_closes(gunicorn, make_agent):
    _, token = make_agent("chunky", namespace="ns-chunky")
    task = _task(gunicorn.url, token)
    oversized = b'{"model": "' + b"x" * (4 * LIMIT) + b'"}'

    answer = _post(gunicorn.url, f"tasks/{task}/model-calls", token, oversized)

    assert answer.status == 413, answer.describe()
    assert answer.envelope["error"]["code"] == "BODY_TOO_LARGE"
    # The rest of the body is never taken for a next request.
    assert answer.headers.get("connection") == "close"
    assert answer.closed and answer.extra == b""
    assert Task.objects.get(id=task).model_calls == 0


def test_a_malformed_chunk_answers_400_in_the_envelope(gunicorn, make_agent):
    _, token = make_agent("chunky", namespace="ns-chunky")
    task = _task(gunicorn.url, token)
    raw = (
        f"POST /api/v1/tasks/{task}/finish HTTP/1.1\r\nHost: {urlsplit(gunicorn.url).netloc}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    ).encode()

    answer = exchange(gunicorn.url, raw)

    assert answer.status == 400, answer.describe()
    assert answer.envelope is not None, answer.describe()
    assert Task.objects.get(id=task).state == "RUNNING"


def test_the_embedded_server_refuses_a_chunked_body_with_411(live_server, make_agent):
    """Django's server hands the application no end to a chunked body: 411, never empty."""
    _, token = make_agent("chunky", namespace="ns-chunky")
    task = _task(live_server.url, token)

    answer = _post(live_server.url, f"tasks/{task}/finish", token,
                   {"evidence": {"revision": 0, "done": True}})  # fmt: skip

    assert answer.status == 411, answer.describe()
    assert answer.envelope["error"]["code"] == "LENGTH_REQUIRED"
    # The chunks left on the connection are never read as a request of their own.
    assert answer.closed and answer.extra == b"", answer.extra
    assert Task.objects.get(id=task).state == "RUNNING"
