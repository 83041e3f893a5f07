"""Text without spaces, as long as an agent may send it (a goal of one 500-character word, a
long URL, a 150-character operation key), wraps where it is shown instead of widening the
page, on a laptop and on a phone."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from tests.browser.layout_tasks import looping_search, lost_write

pytestmark = pytest.mark.browser

WORD = "x" * 500
URL = "https://kb.example.com/" + "/".join(f"section-{n}" for n in range(40)) + "?q=" + "y" * 120
KEY = "pay-" + "k" * 146  # 150 characters
SCREENS = [{"width": 1280, "height": 900}, {"width": 390, "height": 844}]

PAGE_WIDTH = "() => [document.documentElement.scrollWidth, window.innerWidth]"
# The outermost elements that stick out of the window, to name the culprit in a failure.
STICKING_OUT = """() => [...document.querySelectorAll("body *")].filter(element =>
  element.getBoundingClientRect().right > window.innerWidth + 1
  && element.parentElement.getBoundingClientRect().right <= window.innerWidth + 1
).map(element => `${element.tagName.toLowerCase()}.${element.className}`)"""
# How wide `selector`'s first element is drawn, and how wide its content would like to be.
WIDTHS = """selector => {
  const element = document.querySelector(selector);
  return element && {client: element.clientWidth, scroll: element.scrollWidth,
                     right: element.getBoundingClientRect().right};
}"""


def assert_fits(page, where: str) -> None:
    width, viewport = page.evaluate(PAGE_WIDTH)
    assert width <= viewport, (
        f"{where} is {width} px wide in a {viewport} px window: {page.evaluate(STICKING_OUT)}"
    )


def assert_holds_its_content(page, selector: str, what: str) -> None:
    """`selector`'s first element is as wide as its content wants: nothing overflows it."""
    widths = page.evaluate(WIDTHS, selector)
    assert widths["scroll"] <= widths["client"], f"{what} overflows: {widths}"


def open_signed_in(page, console, screen, path: str) -> None:
    page.set_viewport_size(screen)
    sign_in(page, console.url, "adam")
    page.goto(f"{console.url}{path}")


@pytest.mark.parametrize("screen", SCREENS, ids=["laptop", "phone"])
def test_a_goal_without_spaces_wraps_on_the_task_page(page, console, screen, shot):
    word_task = looping_search(console.agent, goal=WORD)
    url_task = looping_search(console.agent, goal=f"Read {URL} and report the price")
    page.set_viewport_size(screen)
    sign_in(page, console.url, "adam")
    for task_id in (word_task, url_task):
        page.goto(f"{console.url}/tasks/{task_id}/")
        assert_fits(page, f"the task page of {task_id}")
    shot(f"long-goal-{screen['width']}")
    page.goto(f"{console.url}/")
    assert_fits(page, "the dashboard")


@pytest.mark.parametrize("screen", SCREENS, ids=["laptop", "phone"])
def test_a_long_operation_key_wraps_on_its_reconcile_card(page, console, screen, shot):
    lost_write(console.agent, KEY, goal=WORD)
    open_signed_in(page, console, screen, "/reconcile/")
    assert_fits(page, "the reconcile queue")
    assert_holds_its_content(page, ".op-card", "the card's content")
    shot(f"long-key-reconcile-{screen['width']}")


@pytest.mark.parametrize("screen", SCREENS, ids=["laptop", "phone"])
def test_a_long_operation_key_wraps_on_the_task_page(page, console, screen):
    task_id = lost_write(console.agent, KEY)
    open_signed_in(page, console, screen, f"/tasks/{task_id}/")
    assert_fits(page, "the task page")
    assert_holds_its_content(page, "#ledger", "the ledger card")
    if screen["width"] >= 1280:
        # Room enough on a laptop: the trace's columns all stay inside its card.
        assert_holds_its_content(page, "#timeline .scroll-x", "the trace (pushed sideways)")
