"""The console on a phone (390 × 844): every page of the navigation can be reached, no page
scrolls sideways, and a table wider than the screen scrolls inside its own card."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.browser.layout_tasks import looping_search, lost_write

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}

# Where each link of the top bar sits, and whether a tap at its centre lands on it.
NAV_LINKS = """() => [...document.querySelectorAll("header.topbar nav a")].map(link => {
  const box = link.getBoundingClientRect();
  const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  return {
    text: link.textContent.trim(), href: link.getAttribute("href"),
    left: box.left, right: box.right, top: box.top, bottom: box.bottom,
    width: box.width, height: box.height, tappable: hit !== null && link.contains(hit),
  };
})"""

PAGE_WIDTH = "() => [document.documentElement.scrollWidth, window.innerWidth]"

# The nearest ancestor of `element` that scrolls sideways, scrolled to its end; then where the
# element and that box are on screen.
SCROLL_TO_END = """element => {
  let box = element.parentElement;
  while (box && !["auto", "scroll"].includes(getComputedStyle(box).overflowX)) {
    box = box.parentElement;
  }
  if (!box) return null;
  box.scrollLeft = box.scrollWidth;
  const inner = element.getBoundingClientRect(), outer = box.getBoundingClientRect();
  return {
    inCard: box.closest(".card") !== null, scrolls: box.scrollWidth > box.clientWidth,
    left: inner.left, right: inner.right, width: inner.width,
    boxLeft: outer.left, boxRight: outer.right, viewport: window.innerWidth,
  };
}"""


@pytest.fixture
def phone(page):
    page.set_viewport_size(PHONE)
    return page


def assert_no_sideways_scroll(page, where: str) -> None:
    width, viewport = page.evaluate(PAGE_WIDTH)
    assert width <= viewport, f"{where} is {width} px wide in a {viewport} px window"


def test_every_navigation_link_can_be_reached_on_a_phone(phone, console):
    sign_in(phone, console.url, "adam")
    links = phone.evaluate(NAV_LINKS)
    assert {"Dashboard", "Reconcile", "Audit log", "Limits", "Agents"} <= {
        link["text"] for link in links
    }
    for link in links:
        assert link["width"] > 0 and link["height"] > 0, f"{link['text']} has no size: {link}"
        assert link["left"] >= 0 and link["right"] <= PHONE["width"], f"off screen: {link}"
        assert link["top"] >= 0 and link["bottom"] <= PHONE["height"], f"off screen: {link}"
        assert link["tappable"], f"a tap on {link['text']} lands on something else: {link}"
    for link in links:
        phone.goto(f"{console.url}/")
        phone.locator("header.topbar nav a", has_text=link["text"]).click()
        expect(phone).to_have_url(f"{console.url}{link['href']}")
        assert_no_sideways_scroll(phone, link["href"])


def test_no_page_scrolls_sideways_on_a_phone(phone, console, shot):
    task_id = looping_search(console.agent)
    lost_write(console.agent, "pay-INV-42")
    sign_in(phone, console.url, "adam")
    for path, name in [
        ("/", "dashboard"),
        ("/agents/", "agents"),
        (f"/tasks/{task_id}/", "task-detail"),
        ("/reconcile/", "reconcile"),
    ]:
        phone.goto(f"{console.url}{path}")
        assert_no_sideways_scroll(phone, path)
        shot(f"phone-{name}")


def test_the_dashboard_table_scrolls_inside_its_card_on_a_phone(phone, console):
    looping_search(console.agent)
    lost_write(console.agent, "pay-INV-42")
    sign_in(phone, console.url, "adam")
    last = phone.locator("table.tasks th", has_text="Last activity")
    expect(last).to_have_count(1)
    seen = last.evaluate(SCROLL_TO_END)
    assert seen is not None, "the task table has no box that scrolls sideways"
    assert seen["inCard"] and seen["scrolls"], seen
    assert seen["width"] > 0, seen
    assert seen["boxLeft"] <= seen["left"] and seen["right"] <= seen["boxRight"] + 1, seen
    assert seen["left"] >= 0 and seen["right"] <= seen["viewport"], seen
    assert_no_sideways_scroll(phone, "/")
