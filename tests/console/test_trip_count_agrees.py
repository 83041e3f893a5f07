"""One day with operator stops, guard stops and unverified finishes: the dashboard, the daily
report, `/metrics` and the advisor show the same breaker trips, counted by the one rule
(`terms.is_trip`): the guard stopped the task; a person, an agent, a completion or an
unverified finish did not."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from agents.guard import terms
from agents.services.rollups import rollup_day
from tests.api.helpers import evidence, finish, gate, new_task, report, send_notice, settle
from tests.conftest import Caller
from tests.console.conftest import signed_in
from tests.metrics.exposition import TOKEN, parse

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(make_agent, client):
    """The API's agent (the console's conftest gives the bare row): a caller and its row."""
    row, token = make_agent("agent-a", namespace="ns-a")
    return Caller(client, token), row


@pytest.fixture
def one_day(agent_api, operator_api):
    """Every kind of end a task meets, today. Three of them are breaker trips."""
    # Not trips: an unverified finish, a completion, an operator's, an agent's and a pause stop.
    finish(agent_api, new_task(agent_api)["id"])
    finish(agent_api, new_task(agent_api)["id"], evidence=evidence(1, done=True))
    stopped = new_task(agent_api)["id"]
    assert operator_api.post(f"tasks/{stopped}/stop", {"reason": "enough"}).status_code == 200
    own = new_task(agent_api)["id"]
    assert agent_api.post(f"tasks/{own}/stop", {}).status_code == 200
    paused = new_task(agent_api)["id"]
    assert operator_api.post("agents/agent-a/pause", {"reason": "check"}).status_code == 200
    assert gate(agent_api, paused)["report"]["reason"] == "agent_paused"
    assert operator_api.post("agents/agent-a/unpause", {"reason": "ok"}).status_code == 200

    # Trips: a model budget used up twice (before and after a resume) and a lost write.
    budget = new_task(agent_api, limits={"max_model_calls": 1})["id"]
    settle(agent_api, budget, gate(agent_api, budget)["model_call"])
    assert gate(agent_api, budget)["report"]["reason"] == "model_budget"
    resumed = operator_api.post(
        f"tasks/{budget}/resume", {"reason": "one more", "grant": {"model_calls": 1}}
    )
    assert resumed.status_code == 200, resumed.body
    settle(agent_api, budget, gate(agent_api, budget)["model_call"])
    assert gate(agent_api, budget)["report"]["reason"] == "model_budget"
    lost = new_task(agent_api)["id"]
    answer = report(agent_api, lost, send_notice(agent_api, lost)["tool_call"], "NO_RESULT")
    assert answer["report"]["reason"] == "unknown_commit"
    return Counter({"GUARD_ROUND_LIMIT": 2, "GUARD_LEDGER": 1})


def dashboard_trips(console) -> Counter:
    page = console.get("/").content.decode()
    block = page[page.index('<ul class="trips">') :]
    block = block[: block.index("</ul>")]
    found = re.findall(r'<span class="code">(\w+)</span> <b>(\d+)</b>', block)
    return Counter({code: int(n) for code, n in found})


def report_trips(console) -> tuple[int, Counter]:
    """The chart's bar for today, and today's rows of the CSV by code."""
    today = timezone.now().date().isoformat()
    page = console.get("/reports/daily/", {"days": 7}).content.decode()
    bar = re.search(rf'data-day="{today}" data-trips="(\d+)"', page)
    assert bar, "no bar for today"
    table = list(csv.DictReader(io.StringIO(console.get("/reports/daily.csv").content.decode())))
    by_code: Counter = Counter()
    for row in table:
        if row["date"] == today:
            by_code.update({code: int(row[code]) for code in terms.TRIP_CODES if int(row[code])})
    return int(bar.group(1)), by_code


def metrics_trips(client, settings) -> Counter:
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_ADDRESSES = ()
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    seen = parse(response.content.decode())
    return Counter(
        {
            code: int(seen.value("loopwarden_trips_today", code=code))
            for code in terms.TRIP_CODES
            if seen.value("loopwarden_trips_today", code=code)
        }
    )


def advisor_trips(console) -> int:
    page = console.get("/reports/daily/", {"days": 7}).content.decode()
    found = re.findall(r'class="profile-sample" data-profile="[^"]*" data-ended="\d+" '
                       r'data-trips="(\d+)"', page)  # fmt: skip
    assert found, "the advisor shows no profile"
    return sum(int(n) for n in found)


def test_the_dashboard_the_report_the_metrics_and_the_advisor_count_the_same_trips(
    one_day, client, settings
):
    console = signed_in(get_user_model().objects.get(username="olivia"))
    rollup_day(day=timezone.now().date())

    on_the_dashboard = dashboard_trips(console)
    bar, in_the_report = report_trips(console)
    in_the_metrics = metrics_trips(client, settings)
    by_the_advisor = advisor_trips(console)

    assert on_the_dashboard == one_day
    assert in_the_report == one_day
    assert bar == 3
    assert in_the_metrics == one_day
    assert by_the_advisor == 3
