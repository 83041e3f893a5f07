"""An operator reconciles an MCP gateway's lost write in the browser: `loopwarden-mcp` (a real
stdio subprocess driven by the MCP SDK's client) times out on the fixture upstream's write,
the operator records COMMITTED with the result in the reconcile queue, and the next gateway
session's identical call is answered REUSE with that result."""

from __future__ import annotations

import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest
from playwright.sync_api import expect

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402

from agents.models import LimitProfile  # noqa: E402
from tests.browser.test_console_flows import sign_in  # noqa: E402
from tests.live import ROOT  # noqa: E402

pytestmark = pytest.mark.browser

FIXTURE = ROOT / "clients" / "python" / "tests" / "mcp_fixtures" / "counting_server.py"
GATEWAY = str(Path(sys.executable).parent / "loopwarden-mcp")


def call_once(config: Path, token: str, tool: str, args: dict):
    """One gateway session making one call, in a thread of its own (Playwright's sync API
    holds this one)."""

    async def session():
        params = StdioServerParameters(
            command=GATEWAY, args=["--config", str(config)], env={"LOOPWARDEN_TOKEN": token}
        )
        async with Client(params, read_timeout_seconds=120) as client:
            return await client.call_tool(tool, args)

    with ThreadPoolExecutor(1) as thread:
        return thread.submit(anyio.run, session).result(timeout=180)


def test_a_gateway_write_lost_then_reconciled_in_the_browser_is_reused(
    page, console, shot, make_agent, tmp_path
):
    # A transactional test before this one may have flushed the migrations' profiles.
    LimitProfile.objects.get_or_create(name="novelty", defaults={"progress_mode": "novelty"})
    _, token = make_agent("desktop-bot", profile="novelty")
    counters = tmp_path / "counters"
    counters.mkdir()
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps({
        "loopwarden": {"url": f"{console.url}/api/v1/", "call_timeout_seconds": 2},
        "mcpServers": {"store": {
            "command": sys.executable, "args": [str(FIXTURE)],
            "env": {"COUNTER_DIR": str(counters)},
            "tools": {"slow_write": {"key": ["item"]}},
        }},
    }))  # fmt: skip
    args = {"item": "row-9", "seconds": 5}
    lost = call_once(config, token, "slow_write", args)
    assert lost.meta["loopwarden/decision"] == "STOP"

    sign_in(page, console.url, "olivia")
    page.goto(f"{console.url}/reconcile/")
    card = page.locator("article.op-card", has_text="store.slow_write")
    card.locator("summary").click()  # the cards are folded; open this one
    expect(card).to_contain_text('item="row-9"')
    card.get_by_label("Committed: it happened").check()
    card.get_by_label("Result (optional)").fill('{"written": "row-9"}')
    card.get_by_label("Note (required)").fill("the row is in the table")
    card.get_by_role("button", name="Record verdict").click()
    expect(card).to_contain_text("Recorded COMMITTED by olivia")
    shot("mcp-reconciled")

    reused = call_once(config, token, "slow_write", args)
    assert reused.meta["loopwarden/decision"] == "REUSE"
    assert reused.structured_content == {"written": "row-9"}
    assert (counters / "calls.log").read_text().count("slow_write") == 1
    page.goto(f"{console.url}/tasks/{reused.meta['loopwarden/task']}/")
    expect(page.locator("#timeline")).to_contain_text("store.slow_write")
    expect(page.locator("#timeline")).to_contain_text(re.compile("REUSE"))
