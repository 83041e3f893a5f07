"""One format each for counts, money, durations and moments (console_formats), rendered
through the template engine as the pages use them; and no template shows a figure, an amount
or a moment past those filters."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.template import Context, Template
from django.utils import timezone

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def render(text: str, **context) -> str:
    return Template("{% load console_formats %}" + text).render(Context(context))


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0, "0"), (7, "7"), (200000, "200,000"), (1234567, "1,234,567"), ("3400", "3,400"),
     (Decimal("12.50"), "12.50"), (None, "—")],
)  # fmt: skip
def test_a_count_has_thousands_separators(value, shown):
    assert render("{{ v|count }}", v=value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [(Decimal("5"), "5.00 USD"), (Decimal("5.000000"), "5.00 USD"), ("0.125", "0.13 USD"),
     (Decimal("1234.5"), "1,234.50 USD"), (Decimal("0"), "0.00 USD"),
     (Decimal("0.000125"), "0.000125 USD"), (Decimal("0.0012"), "0.0012 USD"),
     (Decimal("0.005"), "0.005 USD"), (Decimal("0.0000001"), "0.00 USD"), (None, "—")],
)  # fmt: skip
def test_money_has_two_decimals_up_to_six_below_a_cent_and_the_currency(value, shown):
    assert render("{{ v|money }}", v=value) == shown


def test_money_names_the_configured_currency(settings):
    settings.LOOPWARDEN_CURRENCY = "EUR"
    assert render("{{ v|money }}", v=Decimal("5")) == "5.00 EUR"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.85, "850 ms"), (1.5, "1.5 s"), (1.234, "1.23 s"), (45, "45 s"), (60, "1 min"),
     (125, "2 min 5 s"), (900, "15 min"), (3600, "1 h"), (10800, "3 h"), (7500, "2 h 5 min"),
     (86400, "1 d"), (97200, "1 d 3 h"), (None, "—")],
)  # fmt: skip
def test_a_duration_has_one_style(seconds, shown):
    assert render("{{ v|duration }}", v=seconds) == shown


def test_a_moment_is_a_time_element_with_date_time_and_zone():
    moment = datetime(2026, 12, 4, 5, 16, 3, tzinfo=UTC)
    assert render("{{ v|moment }}", v=moment) == (
        '<time datetime="2026-12-04T05:16:03+00:00">2026-12-04 05:16:03 UTC</time>'
    )


def test_ago_is_a_time_element_titled_with_the_moment():
    moment = timezone.now() - timedelta(minutes=5, seconds=3)
    shown = render("{{ v|ago }}", v=moment)
    assert shown.startswith(f'<time datetime="{moment.isoformat()}" title="{moment:%Y-%m-%d}')
    assert shown.endswith(' UTC">5 min ago</time>')


def test_ago_past_a_day_is_the_moment_itself():
    moment = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert ">2026-01-02 03:04:05 UTC</time>" in render("{{ v|ago }}", v=moment)


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [("max_cost", Decimal("5.000000"), "5.00 USD"), ("cost", Decimal("2"), "2.00 USD"),
     ("deadline_seconds", 900, "15 min"), ("seconds", 3600, "1 h"),
     ("lease_seconds", 30, "30 s"), ("max_tokens", 200000, "200,000"),
     ("near_duplicate_threshold", 0.92, "0.92"), ("progress_mode", "novelty", "novelty"),
     ("max_polls", None, "—")],
)  # fmt: skip
def test_a_limit_is_shown_in_the_format_of_what_it_bounds(name, value, shown):
    assert render("{{ v|limit_shown:n }}", v=value, n=name) == shown


# A variable's last name that holds a figure, an amount or a moment.
FIGURE = re.compile(
    r"(?:^|[._])(count|total|cost|spent|reserved|tokens|calls|executions|trips|failures|"
    r"attempts|ended|pairs|sample|running|phase|repeats|cycles|limit|used|p95|most|low|high|"
    r"current|bound|needed|proposed|minutes|seconds|\w+_at|\w+_tokens|\w+_cost|"
    r"\w+_today|\w+_calls)$"
)
FORMATS = (
    "|count",
    "|money",
    "|duration",
    "|moment",
    "|ago",
    "|limit_shown",
    "|date:",
    "|pluralize",
)
# Texts the views already built with the same functions (budgets.Gauge, the grant bound), and a
# limit's name.
BUILT = {"task.busiest.used", "task.busiest.limit", "bar.used", "bar.limit", "row.bar.used",
         "row.bar.limit", "row.bound", "s.limit"}  # fmt: skip
# Machine values: a form input's value, a data- attribute for scripts and tests.
MACHINE = re.compile(r'(?:\bvalue|\bdata-[\w-]+)="[^"]*$')


def raw_figures(text: str) -> list[str]:
    raw = []
    for line in text.splitlines():
        for found in re.finditer(r"{{\s*(.*?)\s*}}", line):
            expression = found.group(1)
            variable = expression.split("|")[0].strip()
            if not FIGURE.search(variable) or variable in BUILT:
                continue
            if MACHINE.search(line[: found.start()]):
                continue
            if not any(f in expression for f in FORMATS):
                raw.append(expression)
    return raw


def test_no_template_shows_a_figure_past_the_formats():
    raw = [
        f"{path.relative_to(TEMPLATES)}: {{{{ {expression} }}}}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for expression in raw_figures(path.read_text())
    ]
    assert raw == []


def test_the_scan_sees_a_raw_figure():
    """The scan's own check: what it reports, and what it lets through."""
    page = (
        "<td>{{ task.tokens_used }}</td><td>{{ e.created_at }}</td>{{ chart.total_cost }} "
        '{{ c.count }}<td title="{{ op.claimed_at }}">{{ op.claimed_at|ago }}</td>'
        '<input value="{{ row.proposed }}"><tr data-trips="{{ s.trips }}">{{ n|count }}'
    )
    assert raw_figures(page) == [
        "task.tokens_used", "e.created_at", "chart.total_cost", "c.count", "op.claimed_at",
    ]  # fmt: skip
