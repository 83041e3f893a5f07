"""The README's "Guard an MCP client" configuration runs as written: the client's entry starts
`loopwarden-mcp` with the gateway file, which fronts the published servers the client listed
before. Only the machine's own values change: the home directory, the server's URL and the
token."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from conftest import ROOT  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp_helpers import decision, text  # noqa: E402
from test_mcp_published import published  # noqa: E402

pytestmark = pytest.mark.anyio


def readme_block(marker: str) -> str:
    readme = (ROOT / "README.md").read_text()
    found = re.search(rf"<!-- {marker} -->\n```json\n(.*?)```", readme, re.S)
    assert found, f"README.md has no ```json block after <!-- {marker} -->"
    return found.group(1)


def on_this_machine(block: str, home: Path, live) -> dict:
    return json.loads(
        block.replace("/home/me", str(home))
        .replace("http://127.0.0.1:8000/api/v1/", live.api)
        .replace("lw_...", live.agent_token)
    )


def test_the_servers_move_unchanged_under_the_gateway():
    before = json.loads(readme_block("readme-mcp-before"))["mcpServers"]
    gateway = json.loads(readme_block("readme-mcp-gateway"))["mcpServers"]
    assert {name: {k: v for k, v in entry.items() if k != "tools"}
            for name, entry in gateway.items()} == before  # fmt: skip


async def test_the_readme_client_config_runs_as_written(tmp_path, live, monkeypatch, unique):
    # The published servers' commands on PATH, as `pip install mcp-server-time ...` puts them.
    bins = [str(Path(published(n, f"mcp-server-{n}")).parent) for n in ("time", "sqlite")]
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), *bins,
                                                os.environ["PATH"]]))  # fmt: skip
    gateway_file = tmp_path / ".config" / "loopwarden" / "mcp.json"
    gateway_file.parent.mkdir(parents=True)
    gateway_file.write_text(json.dumps(on_this_machine(readme_block("readme-mcp-gateway"),
                                                       tmp_path, live)))  # fmt: skip
    entry = on_this_machine(readme_block("readme-mcp-after"), tmp_path, live)["mcpServers"][
        "loopwarden"
    ]
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])
    async with Client(params, read_timeout_seconds=120) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        table = await client.call_tool(
            "db__create_table", {"query": "CREATE TABLE notes (body TEXT)"}
        )
        # A read with new data is progress under the novelty profile; writes are not.
        now = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
        insert = {"query": f"INSERT INTO notes VALUES ('{unique}')"}
        inserted = [await client.call_tool("db__write_query", insert) for _ in range(2)]
    assert {"time__get_current_time", "db__read_query", "db__write_query"} <= names
    assert decision(now) == "EXECUTE" and "UTC" in text(now)
    assert decision(table) == "EXECUTE"
    assert [decision(a) for a in inserted] == ["EXECUTE", "REUSE"]
    with sqlite3.connect(tmp_path / "shop.db") as db:
        assert db.execute("SELECT body FROM notes").fetchall() == [(unique,)]
