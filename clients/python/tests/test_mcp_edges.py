"""Edges of the gateway over real stdio subprocesses: an upstream that is down when a call
needs it or hangs at its start, several upstreams whose tool names clash or hold the
separator, answers that are not text or too large to store, a retry's idempotency key, a
stop that holds across sessions for a task named in `_meta`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp_helpers import (  # noqa: E402
    GATEWAY,
    HERE,
    counting_server,
    decision,
    executions,
    gateway_env,
    stdio_gateway,
    task_of,
    text,
    write_config,
)

pytestmark = pytest.mark.anyio
EDGE = HERE / "mcp_fixtures" / "edge_server.py"


def edge_server(counter_dir: Path, **extra: Any) -> dict[str, Any]:
    """The edge fixture's `mcpServers` entry; it refuses to start while `counter_dir/down` is."""
    return {
        "command": sys.executable,
        "args": [str(EDGE)],
        "env": {"COUNTER_DIR": str(counter_dir)},
        **extra,
    }


async def test_a_write_to_an_upstream_that_is_down_is_not_sent_and_may_run_later(
    tmp_path, live, lw, operator, counters, unique
):
    tools = {"snapshot": {"key": ["item"]}}
    config = write_config(tmp_path / "gw.json", live, {"edge": edge_server(counters, tools=tools)})
    lost = lw.create_task(f"the upstream exits {unique}")
    async with stdio_gateway(config, live.agent_token) as client:
        await client.list_tools()  # started, its tools listed
        (counters / "down").write_text("")  # from now on it cannot start again
        exited = await client.call_tool(
            "quit_now", {"reason": unique}, meta={"loopwarden/task": lost["id"]}
        )
        down = await client.call_tool("snapshot", {"item": unique})
        task_id = task_of(down)
        assert lw.get_task(task_id)["state"] == "RUNNING"  # a failure within the retry budget
        (counters / "down").unlink()
        up = await client.call_tool("snapshot", {"item": unique})
    assert decision(exited) == "STOP"  # lost mid-call: the read may have acted
    assert (decision(down), down.is_error, task_of(down)) == ("EXECUTE", True, task_id)
    assert "edge" in text(down) and "not sent" in text(down)
    [op] = [o for o in operator.list_operations() if unique in o["key"]]
    assert op["state"] == "COMMITTED"  # never UNKNOWN: the first call never left the gateway
    assert (decision(up), up.is_error) == ("EXECUTE", False)
    assert executions(counters, "snapshot") == [{"item": unique}]


async def test_tools_of_several_upstreams_go_where_they_came_from(tmp_path, live, unique):
    edge, counting = tmp_path / "edge", tmp_path / "counting"
    edge.mkdir()
    counting.mkdir()
    servers = {"edge": edge_server(edge), "count": counting_server(counting)}
    config = write_config(tmp_path / "gw.json", live, servers)
    async with stdio_gateway(config, live.agent_token) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        separated = await client.call_tool("edge__get__thing", {"thing": unique})
        edge_lookup = await client.call_tool("edge__lookup", {"query": unique})
        count_lookup = await client.call_tool("count__lookup", {"query": unique})
    assert {"edge__get__thing", "edge__lookup", "count__lookup"} <= names
    assert (decision(separated), separated.structured_content) == ("EXECUTE", {"thing": unique})
    assert edge_lookup.structured_content["answer"] == f"edge's answer to {unique}"
    assert count_lookup.structured_content["answer"] == f"the answer to {unique}"
    assert executions(edge, "get__thing") == [{"thing": unique}]
    assert executions(edge, "lookup") == executions(counting, "lookup") == [{"query": unique}]


async def test_a_reused_answer_gives_back_images_and_resources(tmp_path, live, counters, unique):
    config = write_config(tmp_path / "gw.json", live, {"edge": edge_server(counters)})
    async with stdio_gateway(config, live.agent_token) as client:
        first = await client.call_tool("snapshot", {"item": unique})
    async with stdio_gateway(config, live.agent_token) as client:
        again = await client.call_tool("snapshot", {"item": unique})
    assert [decision(first), decision(again)] == ["EXECUTE", "REUSE"]
    assert [block.type for block in again.content] == ["image", "resource"]
    assert again.content == first.content and not again.is_error
    assert len(executions(counters, "snapshot")) == 1


async def test_an_upstream_that_hangs_at_start_never_holds_up_the_others(
    tmp_path, live, counters, unique
):
    # `sleep` never answers the handshake: a server stuck at its start. A client gives up on
    # a request after a while (60 s in the TypeScript SDK most desktop clients use).
    servers = {"stuck": {"command": "sleep", "args": ["600"]}, "count": counting_server(counters)}
    config = write_config(tmp_path / "gw.json", live, servers)
    started = time.monotonic()
    async with stdio_gateway(config, live.agent_token) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        first_listing = time.monotonic() - started
        answer = await client.call_tool("count__lookup", {"query": unique})
        started = time.monotonic()
        again = {tool.name for tool in (await client.list_tools()).tools}
        next_listing = time.monotonic() - started
    assert "count__lookup" in names and not any(n.startswith("stuck") for n in names)
    assert again == names
    assert (decision(answer), answer.is_error) == ("EXECUTE", False)
    assert first_listing < 40, f"the first listing took {first_listing:.0f} s"
    assert next_listing < 15, f"a later listing took {next_listing:.0f} s"


async def test_a_write_whose_answer_is_too_large_to_store_still_commits(
    tmp_path, live, operator, counters, unique
):
    # Past the server's body limit (LOOPWARDEN_MAX_BODY_BYTES, 2.5 MB by default).
    tools = {"big_write": {"key": ["item"]}}
    config = write_config(tmp_path / "gw.json", live, {"edge": edge_server(counters, tools=tools)})
    args = {"item": unique, "size": 3_000_000}
    async with stdio_gateway(config, live.agent_token) as client:
        first = await client.call_tool("big_write", args)
        again = await client.call_tool("big_write", args)
    assert (decision(first), first.is_error, len(text(first))) == ("EXECUTE", False, 3_000_000)
    [op] = [o for o in operator.list_operations() if unique in o["key"]]
    assert op["state"] == "COMMITTED"  # the ledger knows, though it could not keep the answer
    # Nothing stored to answer with: said in text, as an error since the tool has an output
    # schema (a client refuses a success without its structured content).
    assert (decision(again), again.is_error) == ("REUSE", True)
    assert "already committed" in text(again)
    assert len(executions(counters, "big_write")) == 1


async def test_a_write_retried_after_a_lost_answer_sends_the_same_idempotency_key(
    tmp_path, live, lw, operator, counters, unique
):
    tools = {"slow_charge": {"key": ["invoice"]}}
    servers = {"pay": edge_server(counters, tools=tools)}
    config = write_config(tmp_path / "gw.json", live, servers, call_timeout_seconds=2)
    async with stdio_gateway(config, live.agent_token) as client:
        lost = await client.call_tool(
            "slow_charge", {"invoice": unique, "idempotency_key": "model-1"}
        )
        [op] = [o for o in operator.list_operations() if unique in o["key"]]
        assert op["state"] == "UNKNOWN"
        # The operator checks with the provider: nothing was charged.
        operator.reconcile(op["id"], verdict="NOT_COMMITTED", note="no charge at the provider")
        operator.resume(task_of(lost), reason="the charge was reconciled")
        retried = await client.call_tool(
            "slow_charge", {"invoice": unique, "idempotency_key": "model-2"}
        )
    assert decision(lost) == "STOP" and "unknown_commit" in text(lost)
    assert (decision(retried), retried.is_error) == ("EXECUTE", False)
    keys = [call["idempotency_key"] for call in executions(counters, "slow_charge")]
    assert keys == [op["key"], op["key"]]  # the provider sees one payment asked twice


async def test_a_stop_holds_for_a_named_task_in_every_session(tmp_path, live, lw, counters, unique):
    config = write_config(tmp_path / "gw.json", live, {"count": counting_server(counters)})
    named = {"loopwarden/task": lw.create_task(f"named {unique}")["id"]}
    async with stdio_gateway(config, live.agent_token) as client:
        looped = [await client.call_tool("lookup", {"query": unique}, meta=named) for _ in range(4)]
    async with stdio_gateway(config, live.agent_token) as client:
        later = await client.call_tool("fetch_page", {"page": 2}, meta=named)
        own = await client.call_tool("fetch_page", {"page": 2})
    assert [decision(a) for a in looped] == ["EXECUTE", "EXECUTE", "BLOCK", "STOP"]
    assert (decision(later), later.is_error, task_of(later)) == (
        "STOP",
        True,
        named["loopwarden/task"],
    )
    assert (
        text(later) == text(looped[3]) and later.meta["loopwarden/report"]["reason"] == "same_call"
    )
    assert (decision(own), task_of(own) != named["loopwarden/task"]) == ("EXECUTE", True)
    assert executions(counters, "fetch_page") == [{"page": 2}]  # the session's own task only
    for answer in (*looped, later, own):
        assert live.agent_token not in answer.model_dump_json()


async def test_a_config_entry_naming_a_key_makes_a_write_whatever_the_annotations(
    tmp_path, live, counters, unique
):
    # `lookup` says readOnlyHint; the admin knows better and names its operation key.
    tools = {"lookup": {"key": ["query"]}}
    config = write_config(tmp_path / "gw.json", live, {"c": counting_server(counters, tools=tools)})
    async with stdio_gateway(config, live.agent_token) as client:
        answers = [await client.call_tool("lookup", {"query": unique}) for _ in range(2)]
    assert [decision(a) for a in answers] == ["EXECUTE", "REUSE"]
    assert answers[1].structured_content == answers[0].structured_content
    assert len(executions(counters, "lookup")) == 1


def test_a_config_entry_for_a_tool_the_upstream_lacks_is_named_on_stderr(tmp_path, live, counters):
    # A misspelt entry would leave the real tool's key derived from all its arguments.
    tools = {"charge_card": {"key": ["invoice"]}, "charge": {"key": ["invoice"]}}
    servers = {"pay": counting_server(counters, tools=tools)}
    config = write_config(tmp_path / "gw.json", live, servers)
    process = subprocess.Popen(
        [GATEWAY, "--config", str(config)], env={**os.environ, **gateway_env(live.agent_token)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "desktop", "version": "1"}}  # fmt: skip
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    stdin = "".join(json.dumps(message) + "\n" for message in messages).encode()
    try:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(stdin)
        process.stdin.flush()
        answers = [json.loads(process.stdout.readline()) for _ in range(2)]
        process.stdin.close()  # the client leaves: the gateway ends
        process.wait(timeout=60)
        assert process.stderr is not None
        err = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
    names = {tool["name"] for tool in answers[1]["result"]["tools"]}
    assert "charge" in names and "charge_card" not in names
    lines = [line for line in err.decode().splitlines() if "charge_card" in line]
    assert len(lines) == 1, err
    assert "mcpServers.pay.tools.charge_card" in lines[0] and "charge" in lines[0]
