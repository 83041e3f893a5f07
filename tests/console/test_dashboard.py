"""The dashboard: counts, stops by code, spend, and a live, filterable task table."""

from __future__ import annotations

import re
from decimal import Decimal

from django.utils import timezone

from agents.models import AgentDay
from agents.services import tasks
from tests.console.conftest import HTMX, without_csrf_tokens


def stat(page: str, label: str) -> int:
    found = re.search(r'stat-value">(\d+)</span>\s*<span class="stat-label">' + label, page)
    assert found, label
    return int(found.group(1))


def test_it_counts_tasks_by_state(as_operator, looping_task, lost_write):
    page = as_operator.get("/").content.decode()
    assert stat(page, "Running") == 1
    assert stat(page, "Needs a human") == 1
    assert stat(page, "Completed") == 0


def test_it_lists_tasks_with_state_agent_goal_phase_budget_and_activity(as_operator, looping_task):
    page = as_operator.get("/").content.decode()
    assert "Find the enterprise price" in page
    assert f'href="/tasks/{looping_task.pk}/"' in page
    assert "agent-a" in page
    assert "Tool requests 2/40" in page or "Tool executions 2/20" in page
    assert "s ago" in page


def test_it_shows_breaker_trips_today_by_code_and_spend_today(
    as_operator, lost_write, stopped_task, agent
):
    AgentDay.objects.update_or_create(
        agent=agent, day=timezone.now().date(), defaults={"spent": Decimal("1.25")}
    )
    page = as_operator.get("/").content.decode()
    assert "GUARD_LEDGER" in page
    assert "GUARD_STOPPED" not in page  # an operator's stop is not a breaker trip
    assert "1.25 USD" in page


def test_filters_live_in_the_url(as_operator, looping_task, lost_write):
    page = as_operator.get("/?state=NEEDS_HUMAN").content.decode()
    assert "Pay invoice INV-42" in page
    assert "Find the enterprise price" not in page
    # the live region polls with the same filters, so a refresh keeps them
    assert 'hx-get="/?state=NEEDS_HUMAN&amp;page=1"' in page


def test_it_filters_by_agent(as_operator, looping_task, make_agent):
    other = make_agent("agent-b", namespace="ns-b")[0]
    tasks.task_create(agent=other, goal="Another agents goal")
    page = as_operator.get("/?agent=agent-b").content.decode()
    assert "Another agents goal" in page
    assert "Find the enterprise price" not in page


def test_needs_human_only_shows_tasks_waiting_for_a_person(as_operator, looping_task, lost_write):
    page = as_operator.get("/?needs_human=on").content.decode()
    assert "Pay invoice INV-42" in page
    assert "Find the enterprise price" not in page


def test_an_unknown_filter_value_is_ignored(as_operator, looping_task):
    response = as_operator.get("/?state=BOGUS&agent=nobody&page=x")
    assert response.status_code == 200
    assert "Find the enterprise price" in response.content.decode()


def test_htmx_gets_only_the_live_region(as_operator, looping_task):
    response = as_operator.get("/?state=RUNNING", **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body
    assert body.lstrip().startswith('<div id="live"')
    assert 'hx-trigger="every 3s"' in body
    assert "Find the enterprise price" in body


def test_a_full_page_carries_the_poll_and_htmx_from_static(as_operator, db, csrf_token_spells):
    csrf_token_spells("unpkgCDN")
    body = as_operator.get("/").content.decode()
    assert "<html" in body
    assert 'hx-trigger="every 3s"' in body
    assert "/static/js/htmx.min.js" in body
    links = re.findall(r'(?:src|href)="([^"]*)"', body)  # ours, or inline (the favicon)
    ours = [u for u in links if u.startswith(("/", "?", "#", "data:")) and not u.startswith("//")]
    assert "/static/css/console.css" in links and ours == links
    page = without_csrf_tokens(body)
    assert "unpkg" not in page and "cdn" not in page.lower()


def test_a_new_task_shows_up_on_the_next_poll(as_operator, agent):
    assert "Brand new goal" not in as_operator.get("/", **HTMX).content.decode()
    tasks.task_create(agent=agent, goal="Brand new goal")
    assert "Brand new goal" in as_operator.get("/", **HTMX).content.decode()


def test_a_history_restore_gets_the_whole_page(as_operator, db):
    response = as_operator.get("/", HTTP_HX_HISTORY_RESTORE_REQUEST="true", **HTMX)
    assert "<html" in response.content.decode()
