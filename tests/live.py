"""Helpers for tests against live servers: racing calls, raw JSON calls.

The gunicorn launcher itself is `devtools.live` (the bench uses it too, and shipped code never
imports tests); it is re-exported here for the tests that start one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx

from devtools.live import ROOT, GunicornServer, database_url, free_port, gunicorn_server

__all__ = [
    "ROOT", "Api", "GunicornServer", "database_url", "free_port", "gunicorn_server", "race",
    "terminal_env",
]  # fmt: skip

T = TypeVar("T")


def race(calls: Sequence[Callable[[], T]], *, timeout: float = 120.0) -> list[T]:
    """Run every call in its own thread, all released at once by a barrier; answers in order.

    An exception in a call is re-raised here (the first one, after all threads finished).
    """
    barrier = threading.Barrier(len(calls))

    def start(call: Callable[[], T]) -> T:
        barrier.wait(timeout=timeout)
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = [pool.submit(start, call) for call in calls]
        return [future.result(timeout=timeout) for future in futures]


def terminal_env(
    *, port: int, settings_dict: Mapping[str, Any], data_dir: Any, drop: Sequence[str] = ()
) -> dict[str, str]:
    """The environment of a second terminal next to a server on `port` and its database: no
    test runner's variables, no PYTHONPATH (and the names in `drop`), the data under
    `data_dir`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))}
    for name in ("PYTHONPATH", *drop):
        env.pop(name, None)
    env.update(
        PORT=str(port),
        DATABASE_URL=database_url(settings_dict),
        LOOPWARDEN_DATA_DIR=str(data_dir),
        PYTHONWARNINGS="ignore",
    )
    return env


class Api:
    """Raw JSON calls with one bearer token: status and body as the server sent them.

    The thin client turns STOP into an exception and retries WAIT; racing tests want to see
    every answer as it is. One `httpx.Client` is shared by the threads (it is thread-safe).
    """

    def __init__(
        self, base: str, token: str, *, timeout: float = 60.0, keepalive: bool = True
    ) -> None:
        # keepalive=False: a new connection per request, so every request is accepted anew by
        # whichever server worker takes it (kept-alive connections stay with one worker).
        self.http = httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=timeout,
            limits=httpx.Limits(max_connections=200,
                                max_keepalive_connections=50 if keepalive else 0),
        )  # fmt: skip

    def post(self, path: str, body: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        return self._answer(self.http.post(path, json=dict(body or {})))

    def get(self, path: str) -> tuple[int, Any]:
        return self._answer(self.http.get(path))

    def patch(self, path: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        return self._answer(self.http.patch(path, json=dict(body)))

    def delete(self, path: str) -> tuple[int, Any]:
        response = self.http.delete(path)
        return (204, None) if response.status_code == 204 else self._answer(response)

    @staticmethod
    def _answer(response: httpx.Response) -> tuple[int, Any]:
        try:
            return response.status_code, response.json()
        except ValueError:  # an HTML error page: keep its text for the assertion message
            return response.status_code, response.text[:500]

    def close(self) -> None:
        self.http.close()
