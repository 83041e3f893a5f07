"""The daily report: rollup table, a chart of breaker trips and spend, CSV, loose limits.

The chart is SVG drawn on the server (no chart library): bars are trips per day on the left
axis, the line is spend per day on the right axis.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.vary import vary_on_headers

from agents import reports, result_advice, roles
from agents.errors import DomainError
from agents.models import Agent
from agents.redaction import redact
from agents.services import policies
from console.access import (
    INVALID,
    HtmxHttpRequest,
    console_view,
    done,
    page,
)
from console.templatetags.console_formats import count, currency, money_figure

DAY_CHOICES = (7, 14, 30, 60, 90)
DEFAULT_DAYS = 30

# Chart geometry, in SVG user units (the SVG scales to its container).
WIDTH, HEIGHT = 760, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 84, 16, 60


@dataclass
class DayColumn:
    """One day's column of the chart: its trips as a bar, in SVG user units."""

    x: float
    y: float
    width: float
    height: float
    day: date
    trips: int
    cost: Decimal


@dataclass
class Tick:
    y: float
    label: str


@dataclass
class Chart:
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right_x: int = WIDTH - RIGHT
    top: int = TOP
    baseline: int = HEIGHT - BOTTOM
    bars: list[DayColumn] = field(default_factory=list)
    points: str = ""  # the spend polyline
    dots: list[tuple[float, float]] = field(default_factory=list)
    trip_ticks: list[Tick] = field(default_factory=list)
    cost_ticks: list[Tick] = field(default_factory=list)
    x_labels: list[Tick] = field(default_factory=list)  # Tick.y holds the x position here
    total_trips: int = 0
    total_cost: Decimal = Decimal(0)
    currency: str = field(default_factory=currency)


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above `value` (an axis maximum)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if value <= step * power + 1e-12:
            return step * power
    return 10 * power


def chart_of(series: list[reports.DayTotal]) -> Chart:
    chart = Chart()
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = chart.baseline - TOP
    slot = plot_w / max(len(series), 1)
    trips_max = nice_ceiling(max((d.trips for d in series), default=0))
    cost_max = nice_ceiling(float(max((d.cost for d in series), default=0)))
    points = []
    for i, total in enumerate(series):
        x = LEFT + i * slot
        height = plot_h * total.trips / trips_max
        chart.bars.append(DayColumn(
            x=round(x + slot * 0.2, 1), y=round(chart.baseline - height, 1),
            width=round(slot * 0.6, 1), height=round(height, 1),
            day=total.day, trips=total.trips, cost=total.cost,
        ))  # fmt: skip
        cx = round(x + slot / 2, 1)
        cy = round(chart.baseline - plot_h * float(total.cost) / cost_max, 1)
        points.append(f"{cx},{cy}")
        chart.dots.append((cx, cy))
    chart.points = " ".join(points)
    for fraction in (0, 0.5, 1):
        y = round(chart.baseline - plot_h * fraction, 1)
        trips = trips_max * fraction
        chart.trip_ticks.append(Tick(y, count(trips) if trips == int(trips) else f"{trips:.1f}"))
        chart.cost_ticks.append(Tick(y, _money_label(cost_max * fraction)))
    every = max(1, math.ceil(len(series) / 6))
    for i in range(len(series) - 1, -1, -every):  # always label the last (today)
        chart.x_labels.append(Tick(round(LEFT + i * slot + slot / 2, 1),
                                   series[i].day.strftime("%b %d")))  # fmt: skip
    chart.total_trips = sum(d.trips for d in series)
    chart.total_cost = sum((d.cost for d in series), Decimal(0))
    return chart


def _money_label(amount: float) -> str:
    """An axis tick: the amount alone (the legend names the currency), whole from 100 up."""
    figure = money_figure(Decimal(str(amount)))
    return figure[:-3] if amount >= 100 and figure.endswith(".00") else figure


def _days(text: str | None) -> int:
    """The report's period from a query or a form: one of DAY_CHOICES, else the default."""
    try:
        days = int(text or DEFAULT_DAYS)
    except ValueError:  # "x", and "²", which str.isdigit() calls a digit
        return DEFAULT_DAYS
    return days if days in DAY_CHOICES else DEFAULT_DAYS


def _filters(request: HttpRequest) -> tuple[int, str]:
    return _days(request.GET.get("days")), request.GET.get("agent", "").strip()


@console_view(roles.VIEW_TASK)
@vary_on_headers("HX-Request")
def daily_report(request: HtmxHttpRequest) -> HttpResponse:
    days, agent = _filters(request)
    rows = list(reports.rollup_rows(days=days, agent=agent))
    series = reports.daily_series(rows, days=days)
    advice = reports.limit_advice(days=days)
    context = {
        "days": days,
        "day_choices": DAY_CHOICES,
        "agent": agent,
        "agents": list(Agent.objects.order_by("name").values_list("name", flat=True)),
        "rows": rows,
        "codes": reports.TRIP_CODES,
        "chart": chart_of(series),
        "advice": advice,
        "suggestions": reports.suggestions_of(advice),
        "min_sample": reports.MIN_SAMPLE,
        "loose_factor": reports.LOOSE_FACTOR,
        "threshold_advice": reports.threshold_advice(),
        **_result_field_context(request, days),
    }
    return page(request, "console/report.html", "console/report/_body.html", context)


def _result_field_context(request: HttpRequest, days: int) -> dict:
    return {
        "result_fields": result_advice.result_field_proposals(days=days),
        "can_apply_result_fields": request.user.has_perm(roles.CHANGE_TOOL_POLICY),
        "result_field_max_keys": result_advice.MAX_KEYS,
    }


@console_view(roles.CHANGE_TOOL_POLICY, methods=("POST",))
def result_fields_apply(request: HtmxHttpRequest) -> HttpResponse:
    """Apply one proposal of the volatile-keys advice: the keys join the tool's
    ignore_result_fields, with an audit row (through the one service)."""
    days = _days(request.POST.get("days"))
    tool = request.POST.get("tool", "").strip()
    keys = request.POST.getlist("keys")
    try:
        policies.tool_policy_ignore_result_fields(
            tool=tool, keys=keys, user=request.user, reason="applied the report's advice"
        )
    except DomainError as error:
        return HttpResponse(error.message, status=INVALID)
    return done(
        request,
        f"{tool} now ignores {', '.join(keys)} in its results.",
        partial="console/report/_result_fields.html",
        context={"days": days, **_result_field_context(request, days)},
        then=f"{reverse('reports')}?days={days}",
    )


@console_view(roles.VIEW_TASK)
def daily_report_csv(request: HttpRequest) -> HttpResponse:
    days, agent = _filters(request)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="loopwarden-daily-{days}d.csv"'
    writer = csv.writer(response)
    writer.writerow(["date", "agent", "task_type", "model_calls", "tool_executions", "tokens",
                     "cost", "trips", *reports.TRIP_CODES])  # fmt: skip
    for row in reports.rollup_rows(days=days, agent=agent):
        writer.writerow([
            row.day.isoformat(), redact(row.agent.name), redact(row.profile), row.model_calls,
            row.tool_executions, row.tokens, f"{row.cost:.6f}", row.trips_total,
            *(row.trips.get(code, 0) for code in reports.TRIP_CODES),
        ])  # fmt: skip
    return response
