"""The waits from the database up to the agent's client are ordered, each inside the next:
the embedded database's lock wait ends (503 DATABASE_UNAVAILABLE with Retry-After, which the
client sends again) before the client's own timeout gives up on an answer the server is still
working on."""

from __future__ import annotations

import pytest
from loopwarden_client import AsyncClient, Client

from loopwarden import settings as project_settings


@pytest.fixture
def sqlite_database(monkeypatch, tmp_path) -> dict:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'db.sqlite3'}")
    return project_settings._database()


def test_the_sqlite_lock_wait_ends_before_the_client_gives_up(sqlite_database):
    lock_wait = sqlite_database["OPTIONS"]["timeout"]
    for client in (Client("http://127.0.0.1:1/api/v1/", "t"),
                   AsyncClient("http://127.0.0.1:1/api/v1/", "t")):  # fmt: skip
        timeout = client._http.timeout
        # The whole request is answered within the lock wait plus a decision's own work.
        assert lock_wait + 5 <= timeout.read, (lock_wait, timeout)
        assert lock_wait + 5 <= timeout.pool, (lock_wait, timeout)
