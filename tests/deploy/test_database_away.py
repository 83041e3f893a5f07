"""While the database cannot be reached the API still answers in its own envelope: 503
DATABASE_UNAVAILABLE with a Retry-After, never Django's HTML error page, so an agent's client
reads an error it can act on (wait, then ask again) and an operator's monitoring sees which."""

from __future__ import annotations

import httpx
import pytest

from tests.live import free_port, gunicorn_server

# Slow (gunicorn processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow


def test_the_api_answers_503_in_its_envelope_while_the_database_is_away():
    nowhere = f"postgres://postgres@127.0.0.1:{free_port()}/loopwarden"  # nothing listens
    with gunicorn_server(database_url=nowhere, workers=1, threads=2) as server:
        answers = [
            httpx.get(f"{server.url}/api/v1/tasks", headers={"Authorization": "Bearer x" * 2}),
            httpx.post(f"{server.url}/api/v1/tasks/7344d36f-d201-4155-8a6b-f46a040f2c29/"
                       "model-calls", json={}, headers={"Authorization": "Bearer abc"}),
        ]  # fmt: skip

    for answer in answers:
        assert answer.status_code == 503, answer.text[:300]
        assert answer.json()["error"]["code"] == "DATABASE_UNAVAILABLE"
        assert int(answer.headers["Retry-After"]) > 0
