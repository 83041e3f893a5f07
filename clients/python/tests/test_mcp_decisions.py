"""The gateway over real stdio: the MCP SDK's client runs `loopwarden-mcp` as a subprocess,
which runs the fixture upstream as its own subprocess, against a live Loopwarden. Every
decision is seen by the client and counted at the upstream."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp")

from mcp_helpers import (  # noqa: E402
    counting_server,
    decision,
    executions,
    stdio_gateway,
    task_of,
    text,
    wait_for_state,
    write_config,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def config(tmp_path: Path, live, counters: Path) -> Path:
    servers = {
        "billing": counting_server(
            counters,
            tools={"charge": {"key": ["invoice"]}, "refuse": {"key": ["item"]}, "lookup": "read"},
        )
    }
    return write_config(tmp_path / "gateway.json", live, servers)


async def test_tools_are_listed_with_their_annotations(config, live):
    async with stdio_gateway(config, live.agent_token) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {"lookup", "create_invoice", "charge", "slow_write", "crash"} <= set(tools)
    assert tools["lookup"].annotations.read_only_hint is True
    assert tools["create_invoice"].annotations is None


async def test_a_repeated_read_is_blocked_then_stopped(config, live, counters, unique):
    async with stdio_gateway(config, live.agent_token) as client:
        answers = [await client.call_tool("lookup", {"query": unique}) for _ in range(5)]
        other = await client.call_tool("fetch_page", {"page": 1})
    assert [decision(a) for a in answers] == ["EXECUTE", "EXECUTE", "BLOCK", "STOP", "STOP"]
    assert [a.is_error for a in answers] == [False, False, True, True, True]
    assert answers[0].structured_content == {"query": unique, "answer": f"the answer to {unique}"}
    assert "DUPLICATE_TOOL_CALL_BLOCKED" in text(answers[2])
    assert "same_call" in text(answers[3]) and "GUARD_LOOP_DETECTED" in text(answers[3])
    assert text(answers[4]) == text(answers[3])  # sticky: every later call answers the same
    assert decision(other) == "STOP" and text(other) == text(answers[3])
    assert len(executions(counters, "lookup")) == 2
    assert executions(counters, "fetch_page") == []
    assert answers[3].meta["loopwarden/report"]["reason"] == "same_call"


async def test_after_a_stop_a_call_answers_the_stop_whatever_its_arguments(
    config, live, counters, unique, operator
):
    # "charge" derives its operation key from "invoice": without it the call's arguments are
    # the model's mistake, but once the task stopped every call answers the stop.
    async with stdio_gateway(config, live.agent_token) as client:
        answers = [await client.call_tool("lookup", {"query": unique}) for _ in range(4)]
        after = await client.call_tool("charge", {"amount": 5})
        operator.resume(task_of(answers[3]), reason="looked at it", grant={"tool_requests": 5})
        resumed = await client.call_tool("charge", {"amount": 5})
    assert decision(answers[3]) == "STOP"
    assert decision(after) == "STOP" and text(after) == text(answers[3])
    # Resumed, the task runs again: the same arguments are the model's mistake once more.
    assert resumed.is_error and "INVALID_TOOL_ARGUMENTS" in text(resumed)
    assert executions(counters, "charge") == []


async def test_a_write_asked_twice_runs_once_and_is_reused_by_the_next_session(
    config, live, counters, unique
):
    args = {"customer": unique, "amount": 42}
    async with stdio_gateway(config, live.agent_token) as client:
        first = await client.call_tool("create_invoice", args)
        second = await client.call_tool("create_invoice", args)
    async with stdio_gateway(config, live.agent_token) as client:
        third = await client.call_tool("create_invoice", args)
    assert [decision(a) for a in (first, second, third)] == ["EXECUTE", "REUSE", "REUSE"]
    assert first.structured_content == {"invoice_id": f"inv-{unique}-1", "amount": 42}
    assert second.structured_content == first.structured_content
    assert third.structured_content == first.structured_content
    assert second.content == first.content and not second.is_error
    assert task_of(third) != task_of(first)  # one task per session, one ledger for all
    assert len(executions(counters, "create_invoice")) == 1


async def test_the_upstream_idempotency_key_is_the_ledger_key(config, live, counters, unique):
    async with stdio_gateway(config, live.agent_token) as client:
        first = await client.call_tool("charge", {"invoice": unique, "idempotency_key": "model-1"})
        again = await client.call_tool("charge", {"invoice": unique, "idempotency_key": "model-2"})
    assert [decision(first), decision(again)] == ["EXECUTE", "REUSE"]
    [charged] = executions(counters, "charge")
    assert charged["idempotency_key"] == f'billing.charge:invoice="{unique}"'
    assert again.structured_content == first.structured_content


async def test_a_session_end_finishes_its_task(config, live, lw, unique):
    async with stdio_gateway(config, live.agent_token) as client:
        answer = await client.call_tool("lookup", {"query": unique})
    task = wait_for_state(lw, task_of(answer), {"PARTIAL", "COMPLETED"})
    assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
    trace = lw.trace(task["id"])
    assert [c["tool"] for c in trace["calls"] if c.get("tool")] == ["billing.lookup"]


async def test_an_operator_stop_ends_the_next_call(config, live, lw, operator, counters, unique):
    async with stdio_gateway(config, live.agent_token) as client:
        first = await client.call_tool("lookup", {"query": unique})
        operator.stop(task_of(first), reason="enough of this")
        after = await client.call_tool("fetch_page", {"page": 7})
    assert decision(first) == "EXECUTE"
    assert decision(after) == "STOP" and after.is_error
    assert "STOPPED/operator_stop" in text(after) and "GUARD_STOPPED" in text(after)
    assert executions(counters, "fetch_page") == []


async def test_an_upstream_error_is_a_failure_and_the_write_may_run_again(
    config, live, lw, operator, counters, unique
):
    async with stdio_gateway(config, live.agent_token) as client:
        first = await client.call_tool("refuse", {"item": unique})
        second = await client.call_tool("refuse", {"item": unique})
        assert lw.get_task(task_of(first))["state"] == "RUNNING"  # within the retry budget
    assert first.is_error and "read-only" in text(first)
    assert [decision(first), decision(second)] == ["EXECUTE", "EXECUTE"]
    assert len(executions(counters, "refuse")) == 2  # NOT_COMMITTED: the key may execute again
    [op] = [o for o in operator.list_operations() if unique in o["key"]]
    assert op["state"] == "NOT_COMMITTED"


async def test_a_task_named_in_meta_is_used(config, live, lw, unique):
    task = lw.create_task(f"named {unique}")
    async with stdio_gateway(config, live.agent_token) as client:
        answer = await client.call_tool(
            "lookup", {"query": unique}, meta={"loopwarden/task": task["id"]}
        )
    assert (decision(answer), task_of(answer)) == ("EXECUTE", task["id"])
    assert lw.get_task(task["id"])["state"] == "RUNNING"  # not the session's: not finished
