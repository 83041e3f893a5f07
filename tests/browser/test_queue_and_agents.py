"""The reconcile queue filtered in a real browser by namespace, agent and age (htmx swaps the
list, the URL follows), a folded card opened with a click; the agents table with one agent's
details opened."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from loopwarden_client import Client
from playwright.sync_api import expect

from tests.browser.conftest import _last_line, sign_in
from tests.browser.test_console_search import lose_a_payment

pytestmark = pytest.mark.browser


def test_an_operator_filters_the_queue_and_opens_a_card(page, console, shot):
    from ledger.models import Operation

    lose_a_payment(console.agent, "INV-1")
    lose_a_payment(console.agent, "INV-2")
    token = _last_line("create_agent", "billing-bot", namespace="billing")
    billing = Client(console.url + "/api/v1/", token, timeout=20)
    try:
        lose_a_payment(billing, "INV-9")
    finally:
        billing.close()
    Operation.objects.filter(operation_key="pay-INV-2").update(
        claimed_at=timezone.now() - timedelta(hours=3)
    )
    sign_in(page, console.url, "olivia")
    page.goto(f"{console.url}/reconcile/")
    cards = page.locator("article.op-card")
    expect(cards).to_have_count(3)
    expect(page.get_by_label("Note (required)").first).to_be_hidden()  # folded
    page.evaluate("window.__sameDocument = true")

    page.get_by_label("Namespace").select_option("billing")
    expect(cards).to_have_count(1)
    expect(cards.first).to_contain_text("pay-INV-9")
    expect(page).to_have_url(re.compile(r"namespace=billing"))
    page.get_by_label("Namespace").select_option("")
    expect(cards).to_have_count(3)
    page.get_by_label("Agent").select_option("support-bot")
    expect(cards).to_have_count(2)
    expect(page).to_have_url(re.compile(r"agent=support-bot"))
    page.get_by_label("Older than").fill("2")
    page.get_by_label("Age unit").select_option("hours")
    page.get_by_role("button", name="Filter").click()
    expect(cards).to_have_count(1)
    card = cards.first
    expect(card).to_contain_text("pay-INV-2")
    expect(card).to_contain_text("pay_invoice")
    expect(card).to_contain_text("3 h ago")
    assert page.evaluate("window.__sameDocument") is True  # htmx swapped the list

    # The age box's change, the unit's and the button each sent a request: a later swap would
    # fold the card again, so open it once the last has landed.
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    card.locator("summary").click()
    expect(card.get_by_label("Note (required)")).to_be_visible()
    expect(card.get_by_role("button", name="Record verdict")).to_be_visible()
    shot("reconcile-queue-filtered")


def test_the_agents_page_is_a_table_with_details_on_demand(page, console, shot):
    _last_line("create_agent", "billing-bot", namespace="billing")
    sign_in(page, console.url, "adam")
    page.goto(f"{console.url}/agents/")
    rows = page.locator("table.agents-table tr.agent-row")
    expect(rows).to_have_count(2)
    issue = page.locator("button", has_text="Issue a token")
    expect(issue).to_have_count(2)
    expect(issue.first).to_be_hidden()
    expect(issue.last).to_be_hidden()  # every agent's forms are folded
    page.locator("#details-billing-bot > summary").click()
    details = page.locator("#details-billing-bot")
    expect(details.get_by_role("button", name="Issue a token")).to_be_visible()
    expect(details.get_by_role("button", name="Revoke")).to_be_visible()
    shot("agents-table")
