"""What the MCP gateway tests share: a config file, the gateway as a real subprocess (stdio or
HTTP) driven by the MCP SDK's own client, and the fixture upstream's counters."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
COUNTING = HERE / "mcp_fixtures" / "counting_server.py"
GATEWAY = str(Path(sys.executable).parent / "loopwarden-mcp")


def counting_server(counter_dir: Path, **extra: Any) -> dict[str, Any]:
    """The fixture upstream's `mcpServers` entry."""
    return {
        "command": sys.executable,
        "args": [str(COUNTING)],
        "env": {"COUNTER_DIR": str(counter_dir)},
        **extra,
    }


def write_config(path: Path, live: Any, servers: dict[str, Any], **loopwarden: Any) -> Path:
    path.write_text(json.dumps({
        "loopwarden": {"url": live.api, "goal": "an MCP test session", **loopwarden},
        "mcpServers": servers,
    }))  # fmt: skip
    return path


def executions(counter_dir: Path, tool: str) -> list[dict[str, Any]]:
    """The fixture upstream's real executions of `tool`, in order."""
    log = counter_dir / "calls.log"
    if not log.exists():
        return []
    calls = []
    for line in log.read_text().splitlines():
        name, _, args = line.partition(" ")
        if name == tool:
            calls.append(json.loads(args))
    return calls


def gateway_env(token: str) -> dict[str, str]:
    return {"LOOPWARDEN_TOKEN": token, "LOG_LEVEL": "WARNING"}


@asynccontextmanager
async def stdio_gateway(config: Path, token: str) -> AsyncIterator[Client]:
    """The `loopwarden-mcp` command as a desktop client runs it: a subprocess over stdio."""
    params = StdioServerParameters(
        command=GATEWAY, args=["--config", str(config)], env=gateway_env(token)
    )
    async with Client(params, read_timeout_seconds=120) as client:
        yield client


@contextmanager
def http_gateway(config: Path, token: str, port: int) -> Iterator[str]:
    """`loopwarden-mcp --http`: the URL of its /mcp endpoint, once it answers."""
    env = {**os.environ, **gateway_env(token)}
    process = subprocess.Popen(
        [GATEWAY, "--config", str(config), "--http", f"127.0.0.1:{port}"],
        env=env, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        try:
            _wait_for_port(port, process)
        except RuntimeError:
            error = process.stderr.read() if process.stderr else b""
            raise RuntimeError(f"the HTTP gateway did not start: {error!r}") from None
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def decision(result: types.CallToolResult) -> str | None:
    return (result.meta or {}).get("loopwarden/decision")


def task_of(result: types.CallToolResult) -> str | None:
    return (result.meta or {}).get("loopwarden/task")


def text(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent))


def wait_for_state(lw: Any, task_id: str, states: set[str], timeout: float = 30) -> dict[str, Any]:
    """The task once it reached one of `states` (a session's end finishes it asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        task = lw.get_task(task_id)
        if task["state"] in states or time.monotonic() > deadline:
            return task
        time.sleep(0.2)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def http_upstream(counter_dir: Path) -> Iterator[str]:
    """The fixture upstream served over streamable HTTP: its /mcp URL."""
    port = free_port()
    env = {**os.environ, "COUNTER_DIR": str(counter_dir)}
    process = subprocess.Popen(
        [sys.executable, str(COUNTING), "--http", str(port)], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        _wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=20)


def _wait_for_port(port: int, process: subprocess.Popen[Any]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on {port}") from None
            time.sleep(0.2)
