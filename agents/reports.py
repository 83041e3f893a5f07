"""Reads for the daily report: rollup rows, a per-day series, and limits that look too loose.

The rows come from `DailyRollup` (see agents.services.rollups); the limit suggestions from the
usage of COMPLETED tasks, compared with their profile's limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_CEILING, Decimal

from django.core.cache import cache
from django.db.models import QuerySet
from django.utils import timezone

from agents import loop_eval
from agents.guard import terms
from agents.models import DailyRollup, Event, LimitProfile, Task
from agents.selectors import labelled_traces

# Every breaker code, in a stable order (CSV columns, table columns).
TRIP_CODES: tuple[str, ...] = tuple(sorted({c for c in terms.REASON_CODES.values() if c}))

# Suggest tightening a limit only with enough evidence, and only when the limit is more than
# LOOSE_FACTOR times the p95 of what completed tasks used: p95 x 1.5 to 2 still leaves room.
MIN_SAMPLE = 5
LOOSE_FACTOR = 3
SUGGEST_LOW, SUGGEST_HIGH = Decimal("1.5"), Decimal("2")


def window(days: int, *, today: date | None = None) -> tuple[date, date]:
    """The first and last day of the `days` days ending today (UTC)."""
    last = today or timezone.now().date()
    return last - timedelta(days=days - 1), last


def rollup_rows(*, days: int, agent: str = "", today: date | None = None) -> QuerySet:
    first, last = window(days, today=today)
    rows = DailyRollup.objects.filter(day__gte=first, day__lte=last).select_related("agent")
    if agent:
        rows = rows.filter(agent__name=agent)
    return rows.order_by("-day", "agent__name", "profile")


@dataclass
class DayTotal:
    day: date
    trips: int
    cost: Decimal
    model_calls: int
    tool_executions: int
    tokens: int


def daily_series(rows, *, days: int, today: date | None = None) -> list[DayTotal]:
    """One total per day of the window, oldest first, zero for days without rows."""
    first, _last = window(days, today=today)
    by_day = {
        first + timedelta(days=i): DayTotal(first + timedelta(days=i), 0, Decimal(0), 0, 0, 0)
        for i in range(days)
    }
    for row in rows:
        total = by_day.get(row.day)
        if total is None:
            continue
        total.trips += row.trips_total
        total.cost += row.cost
        total.model_calls += row.model_calls
        total.tool_executions += row.tool_executions
        total.tokens += row.tokens
    return list(by_day.values())


@dataclass
class Suggestion:
    profile: str
    limit: str  # the LimitProfile field
    current: Decimal | int
    p95: Decimal | int
    low: Decimal | int
    high: Decimal | int
    sample: int


# (LimitProfile field, how a completed task's usage of it is read)
USAGE = (
    ("max_model_calls", "model_calls"),
    ("max_tool_requests", "tool_requests"),
    ("max_tool_executions", "tool_executions"),
    ("max_tokens", "tokens_used"),
    ("max_cost", "cost_spent"),
    ("deadline_seconds", None),  # wall time from creation to completion
)


def p95(values: list) -> Decimal | int:
    """Nearest-rank 95th percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def limit_suggestions(*, days: int, today: date | None = None) -> list[Suggestion]:
    """Limits far above what COMPLETED tasks of the profile needed in the window.

    For each profile with at least MIN_SAMPLE completed tasks, a limit is flagged when it is
    more than LOOSE_FACTOR times the p95 usage; the suggestion is p95 x 1.5 to p95 x 2,
    rounded up (money to the cent).
    """
    first, _last = window(days, today=today)
    fields = [usage for _limit, usage in USAGE if usage]
    completed = Task.objects.filter(
        state=terms.COMPLETED, profile__isnull=False, created_at__date__gte=first
    ).values_list("profile_id", "created_at", "ended_at", *fields)
    by_profile: dict[int, list[tuple]] = {}
    for row in completed:
        by_profile.setdefault(row[0], []).append(row)
    suggestions: list[Suggestion] = []
    for profile in LimitProfile.objects.filter(pk__in=by_profile).order_by("name"):
        rows = by_profile[profile.pk]
        if len(rows) < MIN_SAMPLE:
            continue
        for limit, usage in USAGE:
            if usage is None:
                values = [
                    math.ceil((ended - created).total_seconds())
                    for _p, created, ended, *_ in rows
                    if ended is not None
                ]
            else:
                index = 3 + fields.index(usage)
                values = [row[index] for row in rows]
            if len(values) < MIN_SAMPLE:
                continue
            current = getattr(profile, limit)
            top = p95(values)
            if top <= 0 or current <= top * LOOSE_FACTOR:
                continue
            suggestions.append(Suggestion(
                profile=profile.name, limit=limit, current=current, p95=top,
                low=_round_up(top * SUGGEST_LOW, money=limit == "max_cost"),
                high=_round_up(top * SUGGEST_HIGH, money=limit == "max_cost"),
                sample=len(values),
            ))  # fmt: skip
    return suggestions


def _round_up(value, *, money: bool) -> Decimal | int:
    amount = Decimal(value)
    if money:
        return amount.quantize(Decimal("0.01"), rounding=ROUND_CEILING)
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


@dataclass
class ThresholdAdvice:
    """The near_duplicate_threshold loop_eval recommends, and on what it was measured."""

    threshold: float
    precision: float
    recall: float
    shipped: int  # labelled traces shipped in the repository
    labelled: int  # stops operators labelled in the console


def threshold_advice() -> ThresholdAdvice | None:
    """loop_eval's recommendation over the shipped traces plus the operators' labelled stops.

    Replaying costs a few hundred milliseconds, so the answer is cached until a label changes.
    """
    latest = Event.objects.filter(kind="stop_labelled").order_by("-pk").values_list("pk", flat=True)
    key = f"lw:threshold-advice:{latest.first() or 0}"
    cached = cache.get(key)
    if cached is not None:
        return cached or None
    shipped = loop_eval.load_traces()
    labelled = labelled_traces()
    best = loop_eval.recommend(loop_eval.evaluate(shipped + labelled))
    advice = (
        ThresholdAdvice(best.threshold or 0.0, best.precision, best.recall, len(shipped),
                        len(labelled))
        if best is not None
        else None
    )  # fmt: skip
    cache.set(key, advice or False, 3600)
    return advice
