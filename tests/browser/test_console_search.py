"""The dashboard's search in a real browser (by operation key, task id, goal, external_ref
and day range), and the reconcile link landing on its card below the sticky top bar."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from loopwarden_client import TaskStopped
from playwright.sync_api import expect

from tests.browser.conftest import sign_in

pytestmark = pytest.mark.browser


def lose_a_payment(agent, invoice: str) -> str:
    """A task whose payment's answer was lost: NEEDS_HUMAN, its write UNKNOWN."""
    task = agent.create_task(f"Pay invoice {invoice} exactly once", external_ref=f"ZD-{invoice}")
    pay = agent.request_tool(
        task["id"], "pay_invoice", {"invoice": invoice},
        effect="write", operation_key=f"pay-{invoice}",
    )  # fmt: skip
    assert pay["decision"] == "EXECUTE"
    with pytest.raises(TaskStopped):
        agent.report_result(task["id"], pay["tool_call"], "NO_RESULT", error="read timeout")
    return task["id"]


def test_an_operator_finds_a_task_by_its_operation_key(page, console, shot):
    found = lose_a_payment(console.agent, "INV-77")
    lose_a_payment(console.agent, "INV-78")
    console.agent.create_task("Summarise the quarterly report")
    sign_in(page, console.url, "olivia")
    rows = page.locator("table.tasks tbody tr")
    expect(rows).to_have_count(3)
    page.evaluate("window.__sameDocument = true")  # gone if the page ever reloads

    page.get_by_role("searchbox", name="Search").fill("pay-INV-77")

    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Pay invoice INV-77 exactly once")
    expect(page).to_have_url(re.compile(r"q=pay-INV-77"))
    assert page.evaluate("window.__sameDocument") is True  # htmx swapped the rows
    shot("dashboard-search")
    rows.first.get_by_role("link").click()
    expect(page).to_have_url(f"{console.url}/tasks/{found}/")


def test_the_reconcile_link_shows_its_card_below_the_sticky_bar(page, console):
    for number in range(1, 7):
        task_id = lose_a_payment(console.agent, f"INV-{number}")
        if number == 4:
            middle = task_id
    page.set_viewport_size({"width": 1280, "height": 600})
    sign_in(page, console.url, "olivia")
    page.goto(f"{console.url}/tasks/{middle}/")

    page.locator("#actions").get_by_role("link", name="pay-INV-4").click()

    expect(page).to_have_url(re.compile(r"/reconcile/#op-\d+$"))
    card = page.locator("article.op-card", has_text="pay-INV-4")
    expect(card).to_be_visible()
    assert page.evaluate("window.scrollY") > 0  # the page scrolled to the card
    bar = page.locator("header.topbar").bounding_box()
    top = card.bounding_box()
    assert bar and top
    assert top["y"] >= bar["y"] + bar["height"], (top, bar)


def test_an_operator_finds_a_task_by_id_goal_external_ref_and_day(page, console, shot):
    from agents.models import Task

    first = lose_a_payment(console.agent, "INV-77")
    second = lose_a_payment(console.agent, "INV-78")
    report = console.agent.create_task("Summarise the quarterly report")["id"]
    long_ago = timezone.now() - timedelta(days=10)
    Task.objects.filter(pk=first).update(created_at=long_ago)
    sign_in(page, console.url, "olivia")
    rows = page.locator("table.tasks tbody tr")
    expect(rows).to_have_count(3)
    search = page.get_by_role("searchbox", name="Search")

    def only(task_id: str, text: str) -> None:
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text(text)
        expect(rows.first.get_by_role("link")).to_have_attribute("href", f"/tasks/{task_id}/")

    search.fill(second)  # the task id
    only(second, "Pay invoice INV-78 exactly once")
    expect(page).to_have_url(re.compile(rf"q={second}"))
    search.fill("QUARTERLY report")  # words of the goal, any case
    only(report, "Summarise the quarterly report")
    search.fill("zd-inv-77")  # the external_ref
    only(first, "Pay invoice INV-77 exactly once")
    search.fill("")
    expect(rows).to_have_count(3)

    today = timezone.now().date()
    page.get_by_label("Created", exact=True).fill(f"{today:%Y-%m-%d}")
    expect(rows).to_have_count(2)  # the task made ten days ago is before the range
    expect(page).to_have_url(re.compile(rf"created_from={today:%Y-%m-%d}"))
    page.get_by_label("Created", exact=True).fill(f"{long_ago - timedelta(days=1):%Y-%m-%d}")
    page.get_by_label("to", exact=True).fill(f"{long_ago + timedelta(days=1):%Y-%m-%d}")
    only(first, "Pay invoice INV-77 exactly once")
    search.fill("INV-78")  # the search and the range together: nothing
    expect(page.locator("table.tasks tbody td.empty")).to_have_text(
        "No task matches these filters."
    )
    shot("dashboard-search-by-day")
