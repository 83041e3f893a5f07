"""The MCP gateway's lost write, reconciled in the operator console: `loopwarden-mcp` (a real
stdio subprocess, driven by the MCP SDK's client) fronts the counting fixture upstream against
`live_server`; its write times out (UNKNOWN), an operator records COMMITTED with the result in
the console's reconcile form, and the next session's identical call is answered REUSE with
that result, the upstream never called again."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

from django.test import Client as WebClient  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402

from agents.guard import terms  # noqa: E402
from agents.models import LimitProfile  # noqa: E402
from ledger.models import Operation  # noqa: E402
from tests.live import ROOT  # noqa: E402

# Slow (the MCP gateway as a subprocess): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

FIXTURE = ROOT / "clients" / "python" / "tests" / "mcp_fixtures" / "counting_server.py"
GATEWAY = str(Path(sys.executable).parent / "loopwarden-mcp")


def call_once(config: Path, token: str, tool: str, args: dict) -> object:
    """One gateway session (one task) making one call; the answer. In a thread of its own: a
    Playwright test run before it in this process leaves an event loop set in this one."""

    async def session():
        params = StdioServerParameters(
            command=GATEWAY, args=["--config", str(config)], env={"LOOPWARDEN_TOKEN": token}
        )
        async with Client(params, read_timeout_seconds=120) as client:
            return await client.call_tool(tool, args)

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(anyio.run, session).result(timeout=180)


def test_a_lost_write_reconciled_in_the_console_is_reused(
    live_server, make_agent, make_user, tmp_path
):
    # A transactional test before this one may have flushed the migrations' profiles.
    LimitProfile.objects.get_or_create(name="novelty", defaults={"progress_mode": "novelty"})
    _, token = make_agent("desktop-bot", profile="novelty")
    operator, _ = make_user("olivia")
    counters = tmp_path / "counters"
    counters.mkdir()
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({
        "loopwarden": {"url": f"{live_server.url}/api/v1/", "call_timeout_seconds": 2},
        "mcpServers": {"store": {
            "command": sys.executable, "args": [str(FIXTURE)],
            "env": {"COUNTER_DIR": str(counters)},
            "tools": {"slow_write": {"key": ["item"]}},
        }},
    }))  # fmt: skip
    args = {"item": "row-7", "seconds": 5}

    lost = call_once(config, token, "slow_write", args)
    assert lost.is_error and lost.meta["loopwarden/decision"] == "STOP"
    op = Operation.objects.get(operation_key='store.slow_write:item="row-7"')
    assert op.state == terms.UNKNOWN

    console = WebClient()
    console.force_login(operator)
    # The console shows the gateway's task like any other, the upstream server in the tool name.
    task_page = console.get(f"/tasks/{lost.meta['loopwarden/task']}/").content.decode()
    assert "store.slow_write" in task_page and "NEEDS_HUMAN" in task_page.upper()
    assert "store.slow_write" in console.get("/reconcile/").content.decode()
    response = console.post(f"/reconcile/{op.pk}/", {
        f"op{op.pk}-verdict": "COMMITTED",
        f"op{op.pk}-result": '{"written": "row-7"}',
        f"op{op.pk}-note": "the row is in the table",
    })  # fmt: skip
    assert response.status_code == 303
    op.refresh_from_db()
    assert op.state == terms.OP_COMMITTED

    reused = call_once(config, token, "slow_write", args)
    assert reused.meta["loopwarden/decision"] == "REUSE" and not reused.is_error
    assert reused.structured_content == {"written": "row-7"}
    assert (counters / "calls.log").read_text().count("slow_write") == 1
