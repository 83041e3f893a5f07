"""Every page of the console, on a phone (390 × 844) and on a laptop (1280 × 800): no page
scrolls sideways on the phone, and each is kept as a screenshot (artifacts/screenshots/,
which CI keeps). The pages are read from console/urls.py: a route that is neither visited
here nor named as a non-page (an action, a partial, a download) fails the test, so a new page
cannot be forgotten."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.conftest import sign_in
from tests.browser.layout_tasks import looping_search, lost_write
from tests.browser.test_layout_long_text import STICKING_OUT

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}

# Routes that are not pages a person opens: POST-only actions, htmx partials, downloads.
NOT_PAGES = {
    "logout", "task-live", "task-timeline", "task-report", "task-stop", "task-resume",
    "task-label", "operation-reconcile", "agent-pause", "agent-unpause", "agent-profiles",
    "token-issue", "token-revoke", "signin-unlock", "favicon", "reports-csv",
    "result-fields-apply", None,  # None: the unnamed /static/ route
}  # fmt: skip

# The console's text, as an agent may send it: one long word, a long key, large figures.
LONG_GOAL = "Reconcile-the-enterprise-contract-" + "x" * 160
BIG = {"tokens_used": 200_000, "cost_spent": Decimal("1234.5"), "model_calls": 12_345}

# The texts of the report's chart's three axes: none overlaps another, none is cut by the
# chart's edge, and each is drawn at least 9 px high.
CHART_LABELS = """() => {
  const svg = document.querySelector("#report-chart svg").getBoundingClientRect();
  return [...document.querySelectorAll("#report-chart g.axis")].map(axis =>
    [...axis.querySelectorAll("text")].map(text => {
      const box = text.getBoundingClientRect();
      return {text: text.textContent, left: box.left, right: box.right, top: box.top,
              bottom: box.bottom, height: box.height, svg: [svg.top, svg.bottom],
              inside: box.left >= svg.left - 0.5 && box.right <= svg.right + 0.5
              && box.top >= svg.top - 0.5 && box.bottom <= svg.bottom + 0.5};
    }));
}"""


def console_routes() -> set[str | None]:
    from console import urls

    def walk(patterns):
        for entry in patterns:
            if isinstance(entry, URLResolver):
                yield from walk(entry.url_patterns)
            elif isinstance(entry, URLPattern):
                yield entry.name

    return set(walk(urls.urlpatterns))


def assert_fits(page, where: str) -> None:
    width, viewport = page.evaluate("() => [document.documentElement.scrollWidth, innerWidth]")
    assert width <= viewport, (
        f"{where} is {width} px wide in a {viewport} px window: {page.evaluate(STICKING_OUT)}"
    )


def boxes_overlap(a: dict, b: dict) -> bool:
    across = a["left"] < b["right"] and b["left"] < a["right"]
    return across and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def open_everything(page) -> None:
    """Open every folded block (trace args and results, cards, agent details): what an
    operator opens is what must fit."""
    page.evaluate("() => document.querySelectorAll('main details').forEach(d => d.open = true)")


def the_console_with_everything_on_it(console) -> dict[str, str]:
    """Tasks in every state the pages show, an operation to reconcile, a decided one, a
    rollup, a lockout: the paths to visit, by route name."""
    from agents.models import LimitProfile, Task
    from agents.services import operator
    from ledger.models import Operation

    looping = looping_search(console.agent, goal=LONG_GOAL)
    Task.objects.filter(pk=looping).update(**BIG)
    lost = lost_write(console.agent, "pay-INV-42-" + "k" * 120)
    stopped = looping_search(console.agent, goal="Summarise the quarterly report for finance")
    operator.task_stop(task_id=stopped, reason="wrong quarter", actor="user:adam")
    Operation.objects.update(claimed_at=timezone.now() - timedelta(hours=3))
    call_command("rollup_daily", verbosity=0)
    profile = LimitProfile.objects.get(name="patient")
    return {
        "dashboard": "/",
        "dashboard-search": "/?q=INV-42&state=NEEDS_HUMAN",
        "dashboard-dates": f"/?created_from={timezone.now():%Y-%m-%d}",
        "task": f"/tasks/{looping}/",
        "task-needs-human": f"/tasks/{lost}/",
        "task-resume": f"/tasks/{stopped}/",
        "task-limits": f"/tasks/{looping}/limits/",
        "reconcile": "/reconcile/",
        "reconcile-filtered": "/reconcile/?agent=support-bot&older_than=2&unit=hours",
        "audit": "/audit/?everyone=on",
        "limits": "/limits/",
        "profile-new": "/limits/new-profile/",
        "profile-edit": f"/limits/profiles/{profile.name}/",
        "agents": "/agents/?open=support-bot",
        "signin-lockouts": "/sign-in/lockouts/",
        "reports": "/reports/daily/",
        "not-found": "/tasks/00000000-0000-0000-0000-000000000000/",
    }


def test_every_console_route_is_visited_or_named_as_no_page():
    pages = {"login", "dashboard", "task", "task-limits", "reconcile", "audit", "limits",
             "profile-new", "profile-edit", "agents", "signin-lockouts", "reports"}  # fmt: skip
    routes = console_routes()
    assert routes - pages - NOT_PAGES == set(), "a new console route: add it to this test"
    assert pages <= routes


@pytest.mark.parametrize("screen", [PHONE, LAPTOP], ids=["phone", "laptop"])
def test_every_page_fits_the_screen(page, console, shot, screen):
    name = "phone" if screen == PHONE else "laptop"
    paths = the_console_with_everything_on_it(console)
    page.set_viewport_size(screen)
    page.goto(f"{console.url}/login/")
    assert_fits(page, "/login/")
    shot(f"every-page-{name}-login")
    sign_in(page, console.url, "adam")
    for route, path in paths.items():
        page.goto(f"{console.url}{path}")
        expect(page.locator("main")).to_be_visible()
        open_everything(page)
        if screen == PHONE:
            assert_fits(page, path)
        shot(f"every-page-{name}-{route}")

    # The locked sign-in page last: the failures lock this address out.
    page.context.clear_cookies()
    for _ in range(5):
        page.goto(f"{console.url}/login/")
        page.get_by_label("Username").fill("mallory")
        page.get_by_label("Password").fill("guess")
        page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Sign-in locked")).to_be_visible()
    if screen == PHONE:
        assert_fits(page, "the locked sign-in page")
    shot(f"every-page-{name}-signin-locked")


def test_the_next_step_budgets_and_an_agents_details_are_on_a_phones_screen(page, console):
    paths = the_console_with_everything_on_it(console)
    page.set_viewport_size(PHONE)
    sign_in(page, console.url, "adam")
    page.goto(f"{console.url}{paths['task-needs-human']}")
    next_step = page.locator(".next-step")
    expect(next_step).to_be_visible()
    figures = page.locator("#task-live .bar-figure")
    assert figures.count() >= 8
    for figure in [next_step, *figures.all()]:
        box = figure.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    page.goto(f"{console.url}{paths['agents']}")
    card = page.locator("#details-support-bot .agent-card").bounding_box()
    assert card and card["x"] >= 0 and card["x"] + card["width"] <= PHONE["width"], card
    page.goto(f"{console.url}{paths['task']}")
    expect(page.locator("#task-live")).to_contain_text("200,000")
    expect(page.locator("#task-live")).to_contain_text("1,234.50 USD")


@pytest.mark.parametrize("screen", [PHONE, LAPTOP], ids=["phone", "laptop"])
def test_the_report_chart_labels_are_readable(page, console, screen):
    the_console_with_everything_on_it(console)
    page.set_viewport_size(screen)
    sign_in(page, console.url, "adam")
    page.goto(f"{console.url}/reports/daily/?days=30")
    axes = page.evaluate(CHART_LABELS)
    assert len(axes) == 3 and all(axes), axes
    labels = [label for axis in axes for label in axis]
    for label in labels:
        assert label["inside"], f"cut by the chart's edge: {label}"
        assert label["height"] >= 9, f"too small to read: {label}"
    for i, one in enumerate(labels):
        for other in labels[i + 1 :]:
            assert not boxes_overlap(one, other), (one, other)
