"""The reconcile queue's filters and collapsed cards; the agents page as a table with details on
demand, its tokens with their last use, and a revoke that locks the token out of the API."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from agents.guard import terms
from agents.models import ApiToken, Event
from agents.services import tasks
from ledger.models import Operation
from tests.console.conftest import HTMX, tool_step


def lost(agent, key: str, *, minutes_ago: int = 0) -> Operation:
    """An UNKNOWN write of `agent` under `key`, claimed `minutes_ago` minutes ago."""
    task = tasks.task_create(agent=agent, goal=f"Pay {key}")
    tool_step(agent, task.pk, "pay_invoice", {"invoice": key}, kind=terms.NO_RESULT,
              effect=terms.WRITE, operation_key=key)  # fmt: skip
    op = Operation.objects.get(operation_key=key)
    assert op.state == terms.UNKNOWN
    if minutes_ago:
        Operation.objects.filter(pk=op.pk).update(
            claimed_at=timezone.now() - timedelta(minutes=minutes_ago)
        )
    return op


@pytest.fixture
def queue(agent, make_agent):
    other, _ = make_agent("agent-b", namespace="ns-b")
    return {
        "fresh-a": lost(agent, "fresh-a"),
        "old-a": lost(agent, "old-a", minutes_ago=90),
        "old-b": lost(other, "old-b", minutes_ago=60 * 30),
    }


def keys_on(page: str) -> list[str]:
    return [k for k in ("fresh-a", "old-a", "old-b") if k in page]


def test_without_filters_the_queue_shows_every_waiting_write(as_operator, queue):
    page = as_operator.get("/reconcile/").content.decode()
    assert keys_on(page) == ["fresh-a", "old-a", "old-b"]
    assert 'name="agent"' in page and 'name="namespace"' in page and 'name="older_than"' in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"agent": "agent-b"}, ["old-b"]),
        ({"namespace": "ns-a"}, ["fresh-a", "old-a"]),
        ({"older_than": "1", "unit": "hours"}, ["old-a", "old-b"]),
        ({"older_than": "2", "unit": "hours"}, ["old-b"]),
        ({"older_than": "30", "unit": "minutes", "agent": "agent-a"}, ["old-a"]),
        ({"agent": "agent-a", "namespace": "ns-b"}, []),
    ],
)
def test_the_queue_filters_by_agent_namespace_and_age(as_operator, queue, query, expected):
    page = as_operator.get("/reconcile/", query).content.decode()
    assert sorted(keys_on(page)) == sorted(expected)


def test_an_unknown_agent_or_a_bad_age_is_ignored_not_an_error(as_operator, queue):
    response = as_operator.get("/reconcile/", {"agent": "nobody", "older_than": "-3"})
    assert response.status_code == 200
    assert sorted(keys_on(response.content.decode())) == ["fresh-a", "old-a", "old-b"]


def test_htmx_gets_only_the_filtered_list(as_operator, queue):
    response = as_operator.get("/reconcile/", {"agent": "agent-b"}, **HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="queue"')
    assert "<html" not in body and keys_on(body) == ["old-b"]
    # the Clear link, outside the list, follows out of band
    clear = '<span id="queue-clear" hx-swap-oob="true"><a class="quiet-link" href="/reconcile/">'
    assert clear in body


def test_cards_are_collapsed_with_key_tool_task_and_age_in_their_summary(as_operator, queue):
    page = html.unescape(as_operator.get("/reconcile/").content.decode())
    op = queue["old-a"]
    card = page[page.index(f'id="op-{op.pk}"') :]
    card = card[: card.index("</article>")]
    summary = re.search(r"<details[^>]*>\s*<summary[^>]*>(.*?)</summary>", card, re.S)
    assert summary is not None, card
    assert "<details open" not in card  # collapsed until asked
    shown = summary.group(1)
    assert "old-a" in shown and "pay_invoice" in shown and "Pay old-a" in shown
    assert "1 h ago" in shown  # its age
    # the verdict form is inside the card, after the summary
    assert card.index("</summary>") < card.index(f'name="op{op.pk}-verdict"')


def test_a_refused_verdict_comes_back_open(as_operator, queue):
    op = queue["old-a"]
    response = as_operator.post(f"/reconcile/{op.pk}/", {f"op{op.pk}-verdict": "COMMITTED"}, **HTMX)
    assert response.status_code == 422
    assert "<details open" in response.content.decode()


# -- agents ----------------------------------------------------------------------------------


def test_agents_are_a_table_with_details_on_demand(as_admin, agent, make_agent):
    make_agent("agent-b", namespace="ns-b")
    token = ApiToken.objects.get(agent=agent)
    used = timezone.now() - timedelta(minutes=5)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=used)
    page = as_admin.get("/agents/").content.decode()
    start = page.index('<table class="agents-table')
    table = page[start : page.index("</table>", start)]
    heads = re.findall(r"<th scope=\"col\">(.*?)</th>", table[: table.index("</thead>")])
    assert heads[:6] == ["Name", "Namespace", "Profile", "Paused", "Tokens", "Last use"]
    row = re.search(r'<tr class="agent-row[^"]*" id="row-agent-a">(.*?)</tr>', table, re.S)
    assert row is not None
    found = re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row.group(1), re.S)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in found]
    assert cells[:6] == ["agent-a", "ns-a", "default", "no", "1", "5 min ago"]
    # the forms are inside a closed <details>
    details = page[page.index('<details class="agent-details" id="details-agent-a"') :]
    assert details.index("</summary>") < details.index('name="pause-agent-a-reason"')
    assert '<details class="agent-details" id="details-agent-a">' in page


def test_a_refused_form_opens_its_agents_details(as_operator, agent):
    response = as_operator.post("/agents/agent-a/pause/", {})
    assert response.status_code == 422
    assert '<details class="agent-details" id="details-agent-a" open>' in response.content.decode()


def test_revoke_records_an_audit_event_and_the_api_answers_401(as_admin, make_agent):
    _, raw = make_agent("agent-r", namespace="ns-r")
    api = Client()
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert api.get("/api/v1/tasks", **bearer).status_code == 200
    token = ApiToken.objects.get(agent__name="agent-r")
    page = as_admin.get("/agents/").content.decode()
    assert f'action="/agents/agent-r/tokens/{token.pk}/revoke/"' in page
    assert "hx-confirm=" in page
    response = as_admin.post(f"/agents/agent-r/tokens/{token.pk}/revoke/")
    assert response.status_code == 303
    event = Event.objects.get(kind="token_revoked")
    assert (event.actor, event.detail["prefix"]) == ("user:adam", token.prefix)
    assert api.get("/api/v1/tasks", **bearer).status_code == 401


def test_a_form_sends_you_back_to_the_agents_details_open(as_operator, agent):
    response = as_operator.post("/agents/agent-a/pause/", {"pause-agent-a-reason": "runaway"})
    assert response.status_code == 303
    assert response["Location"] == "/agents/?open=agent-a#agent-agent-a"
    page = as_operator.get(response["Location"]).content.decode()
    assert '<details class="agent-details" id="details-agent-a" open>' in page


def test_htmx_answers_the_card_and_its_table_row_out_of_band(as_operator, agent):
    response = as_operator.post("/agents/agent-a/pause/", {"pause-agent-a-reason": "x"}, **HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<article class="card agent-card')
    oob = r'<template><tr class="agent-row paused" id="row-agent-a" hx-swap-oob="true">(.*?)</tr>'
    row = re.search(oob, body, re.S)
    assert row is not None and ">yes</span>" in row.group(1)
