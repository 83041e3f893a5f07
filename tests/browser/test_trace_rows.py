"""The trace's rows in a real browser: a row's args and result open from a collapsed block
(no script), pretty-printed and redacted; the row says how long the call took."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in

pytestmark = pytest.mark.browser


def test_an_operator_opens_a_rows_args_and_result(page, console, shot):
    agent = console.agent
    task = agent.create_task("Look up the enterprise price", external_ref="ZD-9")
    call = agent.request_tool(
        task["id"], "kb_search", {"query": "enterprise price", "api_key": "sk-live-trace-7"}
    )
    assert call["decision"] == "EXECUTE"
    agent.report_result(
        task["id"], call["tool_call"], "SUCCESS", duration_ms=1500,
        data={"price": 420, "plan": "enterprise"},
    )  # fmt: skip
    sign_in(page, console.url, "olivia")
    page.goto(f"{console.url}/tasks/{task['id']}/")
    row = page.locator("table.trace tbody tr.kind-tool").first
    expect(row.locator("td.duration")).to_have_text("1.5 s")
    args = row.locator("details.payload-arguments")
    result = row.locator("details.payload-result")
    expect(args.locator("pre.json")).to_be_hidden()  # collapsed until opened
    expect(result.locator("pre.json")).to_be_hidden()

    args.locator("summary").click()
    result.locator("summary").click()

    expect(args.locator("pre.json")).to_be_visible()
    expect(args.locator("pre.json")).to_contain_text('"query": "enterprise price"')
    expect(args.locator("pre.json")).to_contain_text('"api_key": "•••"')
    expect(result.locator("pre.json")).to_contain_text('"price": 420')
    assert "sk-live-trace-7" not in page.content()
    row.scroll_into_view_if_needed()
    shot("trace-row-opened")


def test_an_opened_block_stays_open_when_the_live_trace_refreshes(page, console):
    agent = console.agent
    task = agent.create_task("Look up the team price")
    call = agent.request_tool(task["id"], "kb_search", {"query": "team price"})
    agent.report_result(task["id"], call["tool_call"], "SUCCESS", data={"price": 42})
    sign_in(page, console.url, "olivia")
    page.goto(f"{console.url}/tasks/{task['id']}/")
    args = page.locator("table.trace details.payload-arguments").first
    args.locator("summary").click()
    expect(args.locator("pre.json")).to_be_visible()

    # The running task's latest trace window is fetched again every few seconds: wait for it.
    page.evaluate(
        """() => new Promise(done => document.body.addEventListener(
            "htmx:afterSettle", event => event.detail.target.id === "timeline" && done()))"""
    )

    expect(page.locator("table.trace details.payload-arguments pre.json").first).to_be_visible()
