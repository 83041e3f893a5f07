"""What the MCP gateway tests share: a config file, the gateway as a real subprocess (stdio or
HTTP) driven by the MCP SDK's own client, and the fixture upstream's counters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
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
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url, timeout=2)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    _, err = process.communicate(timeout=5) if process.poll() is not None else (
                        None, b"")  # fmt: skip
                    raise RuntimeError(f"the HTTP gateway did not start: {err!r}") from None
                time.sleep(0.2)
        yield url
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
