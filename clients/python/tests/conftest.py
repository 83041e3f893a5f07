"""A live Loopwarden for the adapter tests, started from the repository's server code.

These tests run in a process whose sys.path does not hold the repository root (the OpenAI
Agents SDK's `agents` and the server's Django app `agents` share a name): run them as
`python -P -m pytest clients/python/tests`, or from `clients/python`. The server itself runs in
its own processes (migrate, create_agent, gunicorn) with the repository as their working
directory and a fresh SQLite database, so nothing here imports Django.

`LOOPWARDEN_SERVER_ROOT` points at the server's checkout (default: three levels up) and
`LOOPWARDEN_SERVER_PYTHON` at a Python with its requirements (default: this one).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from loopwarden_client import AsyncClient, Client

ROOT = Path(os.environ.get("LOOPWARDEN_SERVER_ROOT") or Path(__file__).resolve().parents[3])
PYTHON = os.environ.get("LOOPWARDEN_SERVER_PYTHON") or sys.executable


def pytest_collection_modifyitems(items):
    # The whole point of these tests: the repository root must not shadow the SDK's `agents`.
    assert str(ROOT) not in [str(Path(p).resolve()) for p in sys.path if p], (
        "run the adapter tests with `python -P -m pytest` from outside the repository root"
    )


@dataclass(frozen=True)
class LiveServer:
    api: str
    agent_token: str  # agent `adapter-bot`, default profile `novelty`
    strict_token: str  # agent `strict-bot`, default profile `default` (evidence mode)
    operator_token: str


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [PYTHON, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(
    env: dict[str, str], *options: str, output: Any, failed: Callable[[], str]
) -> tuple[subprocess.Popen, str]:
    """gunicorn serving the repository's Loopwarden with `env`, once it answers HTTP: its
    process (a session of its own, to stop as a group) and the API's URL. `failed()` says why
    when it exits or does not answer within a minute."""
    port = _free_port()
    process = subprocess.Popen(
        [PYTHON, "-m", "gunicorn", "loopwarden.wsgi:application", "--bind",
         f"127.0.0.1:{port}", *options],
        cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    api = f"http://127.0.0.1:{port}/api/v1/"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(api + "tasks", timeout=2)
            return process, api
        except httpx.HTTPError:
            if process.poll() is not None or time.monotonic() > deadline:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGTERM)
                raise RuntimeError(failed()) from None
            time.sleep(0.2)


@pytest.fixture(scope="session")
def live() -> Iterator[LiveServer]:
    if not (ROOT / "manage.py").exists():
        pytest.skip(f"no Loopwarden server checkout at {ROOT}")
    data_dir = Path(tempfile.mkdtemp(prefix="lw-adapters-"))
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)},
        "DATABASE_URL": f"sqlite:///{data_dir / 'db.sqlite3'}",
        "LOOPWARDEN_DATA_DIR": str(data_dir),
        "SECRET_KEY": "adapter-tests-only",
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
    }
    process = None
    try:
        _manage(env, "migrate", "--noinput")
        agent = _manage(env, "create_agent", "adapter-bot", "--profile", "novelty")
        strict = _manage(env, "create_agent", "strict-bot", "--profile", "default")
        operator = _manage(env, "create_operator", "olivia", "--password", "pw")
        log = open(data_dir / "server.log", "wb")  # noqa: SIM115 - the child keeps it
        process, api = start_gunicorn(
            env, "--workers", "2", "--threads", "4", "--timeout", "60", "--log-level", "warning",
            output=log, failed=lambda: (data_dir / "server.log").read_text()[-3000:],
        )  # fmt: skip
        yield LiveServer(api, agent, strict, operator)
    finally:
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def lw(live) -> Iterator[Client]:
    with Client(live.api, live.agent_token, timeout=30) as client:
        yield client


@pytest.fixture
def operator(live) -> Iterator[Client]:
    with Client(live.api, live.operator_token, timeout=30) as client:
        yield client


@pytest.fixture
def alw(live) -> AsyncClient:
    return AsyncClient(live.api, live.agent_token, timeout=30)


@pytest.fixture
def unique() -> str:
    """A suffix that keeps operation keys apart: the ledger is shared by the namespace."""
    return uuid.uuid4().hex[:8]


@pytest.fixture
def anyio_backend() -> str:
    """The MCP gateway's tests run on asyncio, the backend the MCP SDK serves on."""
    return "asyncio"


@pytest.fixture
def counters(tmp_path):
    """A folder where the fixture upstream counts each tool's executions."""
    directory = tmp_path / "counters"
    directory.mkdir()
    return directory
