"""The daily report page: table, chart of trips and spend, CSV, loose-limit suggestions."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.guard import terms
from agents.models import DailyRollup, LimitProfile, Task
from agents.reports import MIN_SAMPLE, TRIP_CODES, limit_advice, limit_suggestions, p95
from console import views_reports
from console.views_reports import nice_ceiling

URL = "/reports/daily/"
CSV_URL = "/reports/daily.csv"


@pytest.fixture
def operator(make_user, client):
    user, _token = make_user("olivia")
    client.force_login(user)
    return client


@pytest.fixture
def rollups(agent, make_agent):
    other, _ = make_agent("agent-b", namespace="ns-b")
    today = timezone.now().date()
    DailyRollup.objects.create(
        day=today, agent=agent, profile="default", model_calls=12, tool_executions=7,
        tokens=3400, cost=Decimal("1.25"), trips={"GUARD_LOOP_DETECTED": 2, "GUARD_LEDGER": 1},
    )  # fmt: skip
    DailyRollup.objects.create(
        day=today - timedelta(days=3), agent=other, profile="", model_calls=4,
        tool_executions=1, tokens=900, cost=Decimal("0.40"), trips={"GUARD_TIME_LIMIT": 1},
    )  # fmt: skip
    DailyRollup.objects.create(  # outside the 30 days
        day=today - timedelta(days=45), agent=agent, profile="default", model_calls=99,
        cost=Decimal("9"), trips={"GUARD_LEDGER": 9},
    )  # fmt: skip


def test_anonymous_users_are_sent_to_sign_in(client, db):
    response = client.get(URL)
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert client.get(CSV_URL).status_code == 302


def test_users_without_a_console_role_are_refused(make_user, client):
    client.force_login(make_user("oscar", groups=False)[0])
    assert client.get(URL).status_code == 403
    assert client.get(CSV_URL).status_code == 403


def test_the_table_shows_each_day_agent_and_task_type(operator, rollups):
    response = operator.get(URL)

    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Daily report</h1>" in html
    assert html.count("<tr>") == 1 + 2  # header and the two rows of the last 30 days
    assert '<span class="code">GUARD_LOOP_DETECTED</span> <b>2</b>' in html
    assert '<span class="code">GUARD_TIME_LIMIT</span> <b>1</b>' in html
    assert "1.25 USD" in html and "3,400" in html
    assert "4 breaker trips and 1.65 USD spent in the last 30 days" in html


def test_the_chart_has_a_bar_per_day_and_a_spend_line(operator, rollups):
    html = operator.get(URL).content.decode()

    svg = html[html.index("<svg") : html.index("</svg>")]
    bars = re.findall(r'<rect class="bar" [^>]*data-day="([\d-]+)" data-trips="(\d+)"', svg)
    assert len(bars) == 30
    assert bars[-1] == (timezone.now().date().isoformat(), "3")
    assert bars[-4][1] == "1"
    assert sum(int(trips) for _day, trips in bars) == 4
    points = re.search(r'<polyline class="line spend"[^>]*points="([^"]+)"', svg).group(1)
    assert len(points.split()) == 30
    assert "Breaker trips and spend per day" in svg


def test_the_tallest_bar_reaches_the_axis_maximum(operator, rollups):
    html = operator.get(URL).content.decode()
    heights = [float(h) for h in re.findall(r'<rect class="bar"[^>]*height="([\d.]+)"', html)]
    # 3 trips on a nice axis of 5: 3/5 of the plot's height.
    plot = views_reports.HEIGHT - views_reports.TOP - views_reports.BOTTOM
    assert max(heights) == pytest.approx(plot * 3 / 5, abs=0.1)


def test_filters_narrow_the_period_and_the_agent(operator, rollups):
    html = operator.get(URL, {"days": "7", "agent": "agent-b"}).content.decode()

    assert html.count("<tr>") == 1 + 1
    assert len(re.findall(r'<rect class="bar"', html)) == 7
    assert 'value="7" selected' in html


def test_htmx_gets_only_the_report_body(operator, rollups):
    response = operator.get(URL, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert html.lstrip().startswith('<section id="report"')
    assert "<html" not in html and "<svg" in html
    assert "HX-Request" in response["Vary"]


def test_the_csv_has_a_row_per_rollup_and_a_column_per_code(operator, rollups):
    response = operator.get(CSV_URL)

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    table = list(csv.reader(io.StringIO(response.content.decode())))
    header = table[0]
    assert header[:8] == ["date", "agent", "task_type", "model_calls", "tool_executions",
                          "tokens", "cost", "trips"]  # fmt: skip
    assert header[8:] == list(TRIP_CODES)
    assert len(table) == 3
    first = dict(zip(header, table[1], strict=True))
    assert first["agent"] == "agent-a" and first["cost"] == "1.250000" and first["trips"] == "3"
    assert first["GUARD_LOOP_DETECTED"] == "2" and first["GUARD_COST_LIMIT"] == "0"


def test_an_empty_period_says_so(operator):
    html = operator.get(URL).content.decode()
    assert "No activity in this period yet" in html
    assert "0 breaker trips" in html


def completed(profile, n, state=terms.COMPLETED, reason="goal_met", **usage):
    now = timezone.now()
    for i in range(n):
        Task.objects.create(
            agent_id=profile._agent.pk, profile=profile, goal=f"done {i}", state=state,
            reason=reason, limits=profile.limits().to_dict(), deadline_at=now,
            ended_at=now + timedelta(seconds=60 + i), **{k: v(i) for k, v in usage.items()},
        )  # fmt: skip


@pytest.fixture
def loose(agent):
    profile = LimitProfile.objects.create(
        name="lean", max_model_calls=100, max_tool_executions=10, max_cost=Decimal("5"),
        max_tokens=200_000, deadline_seconds=900,
    )  # fmt: skip
    profile._agent = agent
    completed(
        profile,
        20,
        model_calls=lambda i: 2 + i % 6,
        tool_executions=lambda i: 4,
        tokens_used=lambda i: 1000 * (i + 1),
        cost_spent=lambda i: Decimal("0.10"),
    )
    return profile


def test_limits_far_above_the_p95_of_completed_tasks_are_flagged(loose):
    found = {s.limit: s for s in limit_suggestions(days=30)}

    calls = found["max_model_calls"]
    assert (calls.profile, calls.current, calls.p95, calls.low, calls.high, calls.sample) == (
        "lean", 100, 7, 11, 14, 20,
    )  # fmt: skip
    assert (found["max_cost"].low, found["max_cost"].high) == (Decimal("0.15"), Decimal("0.20"))
    assert found["max_tokens"].p95 == 19000
    assert found["deadline_seconds"].p95 == 78  # 60..79 s: the 19th of 20
    assert "max_tool_executions" not in found  # 10 is not far above 4


def test_few_completed_tasks_are_not_enough_to_suggest(agent):
    profile = LimitProfile.objects.create(name="rare", max_model_calls=100)
    profile._agent = agent
    completed(profile, 4, model_calls=lambda i: 1)

    assert limit_suggestions(days=30) == []


def test_fewer_than_twenty_ended_tasks_give_no_advice(agent):
    # Four completed tasks once advised cutting a 900 s deadline to 3-4 s and 5.00 to 0.03.
    profile = LimitProfile.objects.create(name="rare", max_model_calls=100, max_cost=Decimal(5))
    profile._agent = agent
    completed(profile, MIN_SAMPLE - 1, model_calls=lambda i: 1,
              cost_spent=lambda i: Decimal("0.02"))  # fmt: skip

    assert MIN_SAMPLE >= 20
    assert limit_suggestions(days=30) == []
    (sample,) = limit_advice(days=30)
    assert (sample.profile, sample.ended, sample.enough) == ("rare", MIN_SAMPLE - 1, False)


def test_no_advice_goes_below_what_an_observed_run_used(agent):
    profile = LimitProfile.objects.create(name="lean", max_model_calls=100)
    profile._agent = agent
    completed(profile, 20, model_calls=lambda i: 2)
    # One run that did not complete used 30 calls: a limit under 30 would have cut it short.
    completed(profile, 1, model_calls=lambda i: 30, state=terms.PARTIAL, reason="no_progress")

    found = {s.limit: s for s in limit_suggestions(days=30)}

    calls = found["max_model_calls"]
    assert (calls.p95, calls.most, calls.sample) == (2, 30, 21)
    assert calls.low >= 30 and calls.high >= calls.low
    assert all(s.low >= s.most for s in found.values())


def test_each_figure_shows_its_sample_and_the_profiles_trips(operator, loose):
    html = operator.get(URL).content.decode()

    assert 'class="profile-sample" data-profile="lean" data-ended="20" data-trips="0"' in html
    row = html[html.index('data-limit="max_model_calls"') :]
    row = row[: row.index("</tr>")]
    assert "p95 of 20" in row and "most of 20" in row


def test_the_page_shows_the_suggestions(operator, loose):
    html = operator.get(URL).content.decode()

    assert 'data-profile="lean" data-limit="max_model_calls"' in html
    assert "11 – 14" in html


@pytest.mark.parametrize(
    ("values", "expected"), [([5], 5), (list(range(1, 21)), 19), (list(range(1, 101)), 95)]
)
def test_p95_is_the_nearest_rank(values, expected):
    assert p95(values) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(0, 1), (0.3, 0.5), (3, 5), (7, 10), (10, 10), (12, 20), (1.25, 2)]
)
def test_axes_end_on_a_round_number(value, expected):
    assert nice_ceiling(value) == pytest.approx(expected)
