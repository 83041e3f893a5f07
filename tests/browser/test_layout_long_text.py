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
    page.set_viewport_size(screen)
    sign_in(page, console.url, "adam")
    page.goto(f"{console.url}/reconcile/")
    assert_fits(page, "the reconcile queue")
    card = page.evaluate(WIDTHS, ".op-card")
    assert card["scroll"] <= card["client"], f"the card's content overflows it: {card}"
    shot(f"long-key-reconcile-{screen['width']}")


@pytest.mark.parametrize("screen", SCREENS, ids=["laptop", "phone"])
def test_a_long_operation_key_wraps_on_the_task_page(page, console, screen):
    task_id = lost_write(console.agent, KEY)
    page.set_viewport_size(screen)
    sign_in(page, console.url, "adam")
    page.goto(f"{console.url}/tasks/{task_id}/")
    assert_fits(page, "the task page")
    ledger = page.evaluate(WIDTHS, "#ledger")
    assert ledger["scroll"] <= ledger["client"], f"the ledger card overflows: {ledger}"
    if screen["width"] >= 1280:
        # Room enough on a laptop: the trace's columns all stay inside its card.
        trace = page.evaluate(WIDTHS, "#timeline .scroll-x")
        assert trace["scroll"] <= trace["client"], f"the trace is pushed sideways: {trace}"
