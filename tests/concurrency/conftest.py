"""Fixtures for racing tests: the app under gunicorn (several worker processes) against the
test database, started once per session on first use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live import Api, GunicornServer, database_url, gunicorn_server

WORKERS = 4
THREADS = 4  # 16 requests can be in the app at once, spread over 4 processes


class _LazyServer:
    """Starts gunicorn when a test first asks for it, so skipped tests never pay for it."""

    def __init__(self) -> None:
        self._context = None
        self.server: GunicornServer | None = None

    def get(self) -> GunicornServer:
        if self.server is None:
            from django.db import connection

            self._context = gunicorn_server(
                database_url=database_url(connection.settings_dict),
                workers=WORKERS,
                threads=THREADS,
                # A fresh connection per request: nothing stays connected to the test database
                # while pytest-django flushes it between tests or drops it at the end.
                env={"DB_CONN_MAX_AGE": "0"},
            )
            self.server = self._context.__enter__()
        return self.server

    def stop(self) -> None:
        if self._context is not None:
            self._context.__exit__(None, None, None)
            self._context = self.server = None


@pytest.fixture(scope="session")
def _gunicorn_session(django_db_setup) -> Iterator[_LazyServer]:
    lazy = _LazyServer()
    yield lazy
    lazy.stop()  # before django_db_setup's teardown drops the test database


@pytest.fixture
def gunicorn(_gunicorn_session, transactional_db) -> GunicornServer:
    """The app under gunicorn with several workers, sharing this test's (committed) data."""
    return _gunicorn_session.get()


@pytest.fixture
def api_for(gunicorn):
    """`api_for(token)`: raw JSON calls to the gunicorn server with that bearer token."""
    opened: list[Api] = []

    def make(token: str) -> Api:
        api = Api(gunicorn.api, token)
        opened.append(api)
        return api

    yield make
    for api in opened:
        api.close()
