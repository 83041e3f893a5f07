"""An admin's agent actions in a real browser, without a page reload: pause (the kill
switch), a token issued and revoked (after the confirmation), unpause. Each answer swaps the
agent's card and, out of band, its row in the table."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.models import Agent, ApiToken
from tests.browser.conftest import sign_in

pytestmark = pytest.mark.browser


def test_an_admin_pauses_issues_revokes_and_unpauses_without_a_reload(page, console):
    sign_in(page, console.url, "adam")
    page.goto(f"{console.url}/agents/?open=support-bot")
    page.evaluate("window.__kept = 'same page'")  # gone if anything reloads the page
    card = page.locator("#agent-support-bot")
    row = page.locator("#row-support-bot")

    card.get_by_label("Reason to pause (required)").fill("runaway spend")
    card.get_by_role("button", name="Pause every task").click()
    expect(card.locator(".badge", has_text="Paused")).to_be_visible()
    expect(row.locator(".badge", has_text="yes")).to_be_visible()
    expect(page.locator("#toasts .toast").last).to_contain_text("support-bot paused")
    assert Agent.objects.get(name="support-bot").paused

    card.get_by_label("Token name (optional)").fill("worker 2")
    card.get_by_role("button", name="Issue a token").click()
    expect(card.locator(".token-once")).to_be_visible()
    raw = card.locator("input.token-value").input_value()
    new = ApiToken.objects.get(agent__name="support-bot", name="worker 2")
    assert raw.startswith(new.prefix)
    expect(row.locator("td.num").first).to_have_text("2")

    page.once("dialog", lambda dialog: dialog.accept())
    card.locator("tr", has_text="worker 2").get_by_role("button", name="Revoke").click()
    expect(card.locator("tr", has_text="worker 2")).to_contain_text("revoked")
    expect(card.locator(".token-once")).to_have_count(0)  # the token is not shown again
    expect(row.locator("td.num").first).to_have_text("1")
    new.refresh_from_db()
    assert new.revoked_at is not None

    card.get_by_label("Reason to unpause (required)").fill("fixed")
    card.get_by_role("button", name="Unpause").click()
    expect(card.locator(".badge", has_text="Active")).to_be_visible()
    expect(row.locator("td").nth(2)).to_have_text("no")
    assert not Agent.objects.get(name="support-bot").paused

    assert page.evaluate("window.__kept") == "same page"
    expect(page.locator("#agent-support-bot")).to_have_count(1)  # swapped, not nested


def test_a_revoke_dismissed_at_the_confirmation_changes_nothing(page, console):
    sign_in(page, console.url, "adam")
    page.goto(f"{console.url}/agents/?open=support-bot")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.locator("#agent-support-bot").get_by_role("button", name="Revoke").click()
    page.wait_for_timeout(300)
    assert not ApiToken.objects.filter(agent__name="support-bot", revoked_at__isnull=False).exists()
