"""Servers published by others, installed from PyPI, work through the gateway unchanged:
`mcp-server-time` (read-only tools, annotated so) and `mcp-server-sqlite` (no annotations, so
every tool is a write unless the config says read), whose effects are counted afterwards as
rows in the database. Each lives in its own virtualenv (the sqlite server needs `mcp<2`),
made by `.ci/run` under `$LOOPWARDEN_MCP_SERVERS` (default `var/mcp-servers` in the
repository): missing there, these tests fail in CI and are skipped elsewhere."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from conftest import ROOT  # noqa: E402
from mcp_helpers import decision, stdio_gateway, text, write_config  # noqa: E402

pytestmark = pytest.mark.anyio
SERVERS = Path(os.environ.get("LOOPWARDEN_MCP_SERVERS") or ROOT / "var" / "mcp-servers")


def published(name: str, program: str) -> str:
    path = SERVERS / name / "bin" / program
    if not path.exists():
        reason = f"{path} is missing: .ci/run installs it ({name} in its own virtualenv)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return str(path)


async def test_mcp_server_time_answers_through_the_gateway(tmp_path, live):
    servers = {"time": {"command": published("time", "mcp-server-time"),
                        "args": ["--local-timezone", "UTC"]}}  # fmt: skip
    config = write_config(tmp_path / "gw.json", live, servers)
    async with stdio_gateway(config, live.agent_token) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        answer = await client.call_tool("get_current_time", {"timezone": "Europe/Paris"})
        converted = await client.call_tool(
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
    assert tools["get_current_time"].annotations.read_only_hint is True
    assert (decision(answer), answer.is_error) == ("EXECUTE", False)
    assert "Europe/Paris" in text(answer)
    assert (decision(converted), converted.is_error) == ("EXECUTE", False)
    assert "21:00" in text(converted)


async def test_mcp_server_sqlite_writes_once_per_operation(tmp_path, live, unique):
    database = tmp_path / "shop.db"
    servers = {"db": {
        "command": published("sqlite", "mcp-server-sqlite"),
        "args": ["--db-path", str(database)],
        "tools": {"read_query": "read", "list_tables": "read", "describe_table": "read"},
    }}  # fmt: skip
    config = write_config(tmp_path / "gw.json", live, servers)
    insert = {"query": f"INSERT INTO orders (ref) VALUES ('{unique}')"}
    async with stdio_gateway(config, live.agent_token) as client:
        created = await client.call_tool(
            "create_table", {"query": "CREATE TABLE orders (id INTEGER PRIMARY KEY, ref TEXT)"}
        )
    # A session's writes make no verified progress (the gateway has no verifier): three in a
    # row stop its task with no_progress under the default max_stagnant, so each session
    # here makes at most two.
    async with stdio_gateway(config, live.agent_token) as client:
        first = await client.call_tool("write_query", insert)
        again = await client.call_tool("write_query", insert)
    async with stdio_gateway(config, live.agent_token) as client:
        next_session = await client.call_tool("write_query", insert)
        other = await client.call_tool(
            "write_query", {"query": "INSERT INTO orders (ref) VALUES ('other')"}
        )
        rows = await client.call_tool("read_query", {"query": "SELECT ref FROM orders"})
    assert decision(created) == "EXECUTE" and not created.is_error
    assert [decision(a) for a in (first, again, next_session)] == ["EXECUTE", "REUSE", "REUSE"]
    assert again.content == first.content
    assert decision(other) == "EXECUTE"
    assert decision(rows) == "EXECUTE" and unique in text(rows)
    with sqlite3.connect(database) as db:
        refs = [ref for (ref,) in db.execute("SELECT ref FROM orders ORDER BY id")]
    assert refs == [unique, "other"]  # the insert asked three times ran once
