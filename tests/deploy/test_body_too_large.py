"""A body over the size limit answers 413 and leaves the kept-alive connection usable.

Django refuses such a body before reading it, so its bytes are still in flight when the 413
goes out. Agents' clients (httpx, so the thin client) keep connections alive and send the next
request on the same one: the README's advice after a 413 is to report again without the
oversized data, and that report must get an answer, not a dropped connection.
"""

from __future__ import annotations

import httpx
import pytest
from django.db import connection

from tests.live import database_url, gunicorn_server

# Slow (gunicorn processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

LIMIT = 64 * 1024


@pytest.mark.django_db(transaction=True)
def test_the_request_after_a_413_on_the_same_connection_is_answered(make_agent):
    _, token = make_agent("big-bodies", namespace="ns-big-bodies")
    with gunicorn_server(
        database_url=database_url(connection.settings_dict),
        workers=1,
        threads=2,
        env={"LOOPWARDEN_MAX_BODY_BYTES": str(LIMIT), "DB_CONN_MAX_AGE": "0"},
    ) as server:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"{server.url}/api/v1/", headers=headers, timeout=20) as http:
            task = http.post("tasks", json={"goal": "big bodies"}).json()["id"]
            answers, closes = [], []
            for _ in range(5):
                oversized = b'{"model": "' + b"x" * (40 * LIMIT) + b'"}'
                big = http.post(
                    f"tasks/{task}/model-calls",
                    content=oversized,
                    headers={"Content-Type": "application/json"},
                )
                answers.append(big.status_code)
                closes.append(big.headers.get("connection"))
                # The next request on the client's connection.
                answers.append(http.get(f"tasks/{task}").status_code)

    assert answers == [413, 200] * 5
    assert closes == ["close"] * 5  # the client is told, rather than finding out
