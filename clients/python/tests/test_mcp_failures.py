"""Bad upstreams and lost calls through the gateway, over real stdio subprocesses: a write
that times out or is cut mid-call is UNKNOWN and never sent again, an operator reconciles it,
and the next identical call is REUSE; a crash, garbage or a dead server never wedges the
gateway; two sessions racing one write key execute it once."""

from __future__ import annotations

import anyio
import pytest

pytest.importorskip("mcp")

from mcp_helpers import (  # noqa: E402
    counting_server,
    decision,
    executions,
    stdio_gateway,
    task_of,
    text,
    write_config,
)

pytestmark = pytest.mark.anyio


def operation(operator, key_part: str) -> dict:
    [op] = [o for o in operator.list_operations() if key_part in o["key"]]
    return op


async def test_a_write_that_times_out_is_unknown_then_reconciled_then_reused(
    tmp_path, live, lw, operator, counters, unique
):
    servers = {"store": counting_server(counters, tools={"slow_write": {"key": ["item"]}})}
    config = write_config(tmp_path / "gw.json", live, servers, call_timeout_seconds=2)
    args = {"item": unique, "seconds": 6}
    async with stdio_gateway(config, live.agent_token) as client:
        cut = await client.call_tool("slow_write", args)
        again = await client.call_tool("slow_write", args)
        task_id = task_of(cut)
        op = operation(operator, unique)
        assert op["state"] == "UNKNOWN"
        # The operator checks the store and reconciles: it did commit.
        operator.reconcile(op["id"], verdict="COMMITTED", note="row is there",
                           result={"written": unique})  # fmt: skip
        operator.resume(task_id, reason="the write was reconciled")
        resumed = await client.call_tool("slow_write", args)
    async with stdio_gateway(config, live.agent_token) as client:
        next_session = await client.call_tool("slow_write", args)
    assert decision(cut) == "STOP" and cut.is_error
    assert "gave no answer" in text(cut) and "unknown_commit" in text(cut)
    assert decision(again) == "STOP" and "NEEDS_HUMAN/unknown_commit" in text(again)
    assert (decision(resumed), resumed.is_error) == ("REUSE", False)
    assert resumed.structured_content == {"written": unique}
    assert decision(next_session) == "REUSE"
    assert len(executions(counters, "slow_write")) == 1  # never sent again


async def test_a_crash_mid_call_is_unknown_and_the_gateway_keeps_serving(
    tmp_path, live, lw, operator, counters, unique
):
    servers = {
        "a": counting_server(counters, tools={"crash": {"key": ["item"]}}),
        "b": counting_server(counters),
    }
    config = write_config(tmp_path / "gw.json", live, servers)
    fresh = lw.create_task(f"after the crash {unique}")
    async with stdio_gateway(config, live.agent_token) as client:
        crashed = await client.call_tool("a__crash", {"item": unique})
        other = await client.call_tool(
            "b__lookup", {"query": unique}, meta={"loopwarden/task": fresh["id"]}
        )
        restarted = await client.call_tool(
            "a__fetch_page", {"page": 3}, meta={"loopwarden/task": fresh["id"]}
        )
    assert decision(crashed) == "STOP" and crashed.is_error
    assert "a failed during crash" in text(crashed) and "unknown_commit" in text(crashed)
    assert operation(operator, unique)["state"] == "UNKNOWN"
    assert (decision(other), other.is_error) == ("EXECUTE", False)
    assert (decision(restarted), restarted.is_error) == ("EXECUTE", False)
    assert restarted.structured_content["page"] == 3
    assert len(executions(counters, "crash")) == 1


async def test_garbage_from_an_upstream_is_a_clear_tool_error(
    tmp_path, live, lw, operator, counters, unique
):
    servers = {"junk": counting_server(counters, tools={"garbage": {"key": ["item"]}})}
    config = write_config(tmp_path / "gw.json", live, servers, call_timeout_seconds=10)
    fresh = lw.create_task(f"after garbage {unique}")
    async with stdio_gateway(config, live.agent_token) as client:
        answer = await client.call_tool("garbage", {"item": unique})
        later = await client.call_tool(
            "lookup", {"query": unique}, meta={"loopwarden/task": fresh["id"]}
        )
    assert decision(answer) == "STOP" and answer.is_error
    assert "junk" in text(answer) and "unknown_commit" in text(answer)
    assert operation(operator, unique)["state"] == "UNKNOWN"
    assert decision(later) == "EXECUTE"


async def test_a_server_that_cannot_start_leaves_the_others_working(
    tmp_path, live, counters, unique
):
    servers = {
        "ghost": {"command": str(tmp_path / "no-such-program")},
        "billing": counting_server(counters),
    }
    config = write_config(tmp_path / "gw.json", live, servers)
    async with stdio_gateway(config, live.agent_token) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        answer = await client.call_tool("billing__lookup", {"query": unique})
    assert "billing__lookup" in names and not any(n.startswith("ghost") for n in names)
    assert decision(answer) == "EXECUTE"


async def test_two_sessions_racing_one_write_execute_it_once(tmp_path, live, counters, unique):
    servers = {"store": counting_server(counters, tools={"slow_write": {"key": ["item"]}})}
    config = write_config(tmp_path / "gw.json", live, servers, max_wait_tries=10)
    answers = {}

    async def session(name: str) -> None:
        async with stdio_gateway(config, live.agent_token) as client:
            await client.list_tools()
            await ready.wait()
            answers[name] = await client.call_tool("slow_write", {"item": unique, "seconds": 3})

    ready = anyio.Event()
    async with anyio.create_task_group() as sessions:
        sessions.start_soon(session, "one")
        sessions.start_soon(session, "two")
        await anyio.sleep(8)  # both gateways and their upstreams started
        ready.set()
    assert sorted(decision(a) for a in answers.values()) == ["EXECUTE", "REUSE"]
    assert answers["one"].structured_content == answers["two"].structured_content
    assert len(executions(counters, "slow_write")) == 1


async def test_a_wait_past_its_bound_is_a_retry_hint(tmp_path, live, counters, unique):
    servers = {"store": counting_server(counters, tools={"slow_write": {"key": ["item"]}})}
    config = write_config(tmp_path / "gw.json", live, servers, max_wait_tries=1)
    args = {"item": unique, "seconds": 8}
    answers = {}

    async def holder(client) -> None:
        answers["holder"] = await client.call_tool("slow_write", args)

    async with (
        stdio_gateway(config, live.agent_token) as one,
        stdio_gateway(config, live.agent_token) as two,
    ):
        await one.list_tools()
        await two.list_tools()
        async with anyio.create_task_group() as calls:
            calls.start_soon(holder, one)
            while not executions(counters, "slow_write"):  # the holder's write has started
                await anyio.sleep(0.1)
            answers["waiter"] = await two.call_tool("slow_write", args)
    waiter = answers["waiter"]
    assert (decision(waiter), waiter.is_error) == ("WAIT", True)
    assert "OPERATION_IN_FLIGHT" in text(waiter) and '"retryable": true' in text(waiter)
    assert decision(answers["holder"]) == "EXECUTE"
    assert len(executions(counters, "slow_write")) == 1
