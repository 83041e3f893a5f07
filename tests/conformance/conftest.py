"""A live server and its schema for the schemathesis run: gunicorn against the test database,
with an agent, an operator and an admin, and a few tasks, calls and operations to aim at."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.live import ROOT, Api, GunicornServer, database_url, gunicorn_server

AGENT = "agent-st"


@dataclass
class World:
    """What the run can aim at: tokens by role and ids of rows that exist."""

    server: GunicornServer
    tokens: dict[str, str]
    task_ids: list[str] = field(default_factory=list)
    model_call_ids: list[int] = field(default_factory=list)
    tool_call_ids: list[int] = field(default_factory=list)
    operation_ids: list[int] = field(default_factory=list)


def _token(db_url: str, *command: str) -> str:
    """Run a management command in its own process (so its rows are committed for the
    server to see) and return the token it prints last."""
    done = subprocess.run(
        [sys.executable, "manage.py", *command], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "DATABASE_URL": db_url}, check=True, timeout=120,
    )  # fmt: skip
    return done.stdout.strip().splitlines()[-1]


def _seed(api: Api, world: World) -> None:
    """Tasks in several states, with model calls, tool calls and an UNKNOWN write."""
    for goal in ("read the incident", "notify the on-call", "pay invoice INV-7", "idle"):
        status, task = api.post("tasks", {"goal": goal})
        assert status == 201, task
        world.task_ids.append(task["id"])
    first, second, third, _ = world.task_ids
    _, gate = api.post(f"tasks/{first}/model-calls", {"model": "m", "est_prompt_tokens": 10})
    world.model_call_ids.append(gate["model_call"])
    _, asked = api.post(f"tasks/{first}/tool-calls", {"tool": "lookup", "args": {"id": 1},
                                                      "effect": "read"})  # fmt: skip
    world.tool_call_ids.append(asked["tool_call"])
    # A write whose outcome nobody knows: an UNKNOWN operation for the reconcile endpoint.
    _, write = api.post(f"tasks/{second}/tool-calls", {"tool": "notify", "args": {"to": "x"},
                        "effect": "write", "operation_key": "notice-1"})  # fmt: skip
    world.tool_call_ids.append(write["tool_call"])
    api.post(f"tasks/{second}/tool-calls/{write['tool_call']}/result", {"kind": "NO_RESULT"})
    # A committed write: REUSE for a later request under the same key.
    _, paid = api.post(f"tasks/{third}/tool-calls", {"tool": "pay", "args": {"id": "INV-7"},
                       "effect": "write", "operation_key": "pay-INV-7"})  # fmt: skip
    world.tool_call_ids.append(paid["tool_call"])
    api.post(f"tasks/{third}/tool-calls/{paid['tool_call']}/result",
             {"kind": "SUCCESS", "data": {"ok": True},
              "evidence": {"revision": 1, "done": False, "committed": True}})  # fmt: skip
    _, listed = api.get("operations")
    world.operation_ids.extend(op["id"] for op in listed["operations"])


@pytest.fixture(scope="session")
def world(django_db_setup) -> Iterator[World]:
    from django.db import connection

    if connection.vendor != "postgresql":
        # On SQLite the test's own transaction (django_db) holds the database's write lock
        # (transaction_mode IMMEDIATE), so every write of the live server would wait it out
        # and each request time out: a run of a quarter of an hour that proves nothing.
        pytest.skip("the conformance run needs PostgreSQL: DATABASE_URL=postgres://...")
    url = database_url(connection.settings_dict)
    tokens = {
        "agent": _token(url, "create_agent", AGENT),
        "operator": _token(url, "create_operator", "operator-st", "--password", "pw"),
        "admin": _token(url, "create_operator", "admin-st", "--password", "pw", "--admin"),
    }
    # The agent the operator and admin runs pause and unpause, so the agent run keeps going.
    _token(url, "create_agent", "bystander")
    with gunicorn_server(
        database_url=url, workers=3, threads=2, env={"DB_CONN_MAX_AGE": "0"}
    ) as server:
        world = World(server=server, tokens=tokens)
        api, admin = Api(server.api, tokens["agent"]), Api(server.api, tokens["admin"])
        try:
            _seed(api, world)
            status, body = admin.post("profiles", {"name": "tight", "max_model_calls": 5})
            assert status == 201, body
        finally:
            api.close()
            admin.close()
        yield world
