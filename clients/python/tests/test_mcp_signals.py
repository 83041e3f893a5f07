"""A desktop client that stops the gateway with SIGTERM (rather than closing its stdin) still
has the session's task finished, and so does an HTTP gateway stopped the same way."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp_helpers import (  # noqa: E402
    GATEWAY,
    counting_server,
    free_port,
    gateway_env,
    http_gateway,
    task_of,
    wait_for_state,
    write_config,
)


def rpc(process: subprocess.Popen[bytes], message: dict) -> dict | None:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    if "id" not in message:
        return None
    while True:  # skip notifications until the answer
        answer = json.loads(process.stdout.readline())
        if answer.get("id") == message["id"]:
            return answer


def test_sigterm_on_stdio_finishes_the_sessions_task(tmp_path, live, lw, unique):
    counters = tmp_path / "counters"
    counters.mkdir()
    config = write_config(tmp_path / "gw.json", live, {"billing": counting_server(counters)})
    process = subprocess.Popen(
        [GATEWAY, "--config", str(config)], env={**os.environ, **gateway_env(live.agent_token)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        rpc(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "desktop", "version": "1"}}})  # fmt: skip
        rpc(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        answer = rpc(
            process,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "lookup", "arguments": {"query": unique}},
            },
        )
        task_id = answer["result"]["_meta"]["loopwarden/task"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) is not None
    finally:
        if process.poll() is None:
            process.kill()
    task = wait_for_state(lw, task_id, {"PARTIAL"}, timeout=10)
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_http_gateway_stopped_finishes_its_task(tmp_path, live, lw, unique, anyio_backend):
    counters = tmp_path / "counters"
    counters.mkdir()
    config = write_config(tmp_path / "gw.json", live, {"billing": counting_server(counters)})
    with http_gateway(config, live.agent_token, free_port()) as url:
        async with Client(url) as client:  # the 2026 protocol: no HTTP session
            answer = await client.call_tool("lookup", {"query": unique})
    task = wait_for_state(lw, task_of(answer), {"PARTIAL"}, timeout=10)
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
