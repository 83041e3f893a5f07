"""The gateway served over streamable HTTP (`loopwarden-mcp --http`), fronting one upstream over
HTTP and one over stdio, driven by the MCP SDK's client over HTTP."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp_helpers import (  # noqa: E402
    counting_server,
    decision,
    executions,
    free_port,
    http_gateway,
    http_upstream,
    task_of,
    wait_for_state,
    write_config,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def setup(tmp_path, live):
    remote_counters, local_counters = tmp_path / "remote", tmp_path / "local"
    remote_counters.mkdir()
    local_counters.mkdir()
    with http_upstream(remote_counters) as upstream_url:
        servers = {"remote": {"url": upstream_url}, "local": counting_server(local_counters)}
        config = write_config(tmp_path / "gw.json", live, servers)
        with http_gateway(config, live.agent_token, free_port()) as url:
            yield url, remote_counters, local_counters


async def test_every_decision_over_http_in_front_of_an_http_upstream(setup, unique):
    url, remote, local = setup
    async with Client(url) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        write = {"customer": unique, "amount": 5}
        writes = [await client.call_tool("local__create_invoice", write) for _ in range(2)]
        reads = [await client.call_tool("remote__lookup", {"query": unique}) for _ in range(4)]
    assert {"remote__lookup", "local__lookup", "local__create_invoice"} <= names
    assert [decision(a) for a in reads] == ["EXECUTE", "EXECUTE", "BLOCK", "STOP"]
    assert len(executions(remote, "lookup")) == 2
    assert [decision(a) for a in writes] == ["EXECUTE", "REUSE"]
    assert len(executions(local, "create_invoice")) == 1


async def test_each_http_session_has_its_task_finished_when_it_ends(setup, lw, unique):
    url, remote, _ = setup
    async with Client(url, mode="legacy") as one, Client(url, mode="legacy") as two:
        first = await one.call_tool("remote__lookup", {"query": unique})
        second = await two.call_tool("remote__lookup", {"query": unique})
    assert decision(first) == decision(second) == "EXECUTE"
    assert task_of(first) != task_of(second)
    for answer in (first, second):
        task = wait_for_state(lw, task_of(answer), {"PARTIAL"})
        assert (task["state"], task["reason"]) == ("PARTIAL", "goal_unverified")
