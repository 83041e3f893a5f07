"""Reads for the daily report: rollup rows, a per-day series, and limits that look too loose.

The rows come from `DailyRollup` (see agents.services.rollups); the limit advice from the usage
of the tasks of each profile that ended in the period, compared with the profile's limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_CEILING, Decimal

from django.core.cache import cache
from django.db.models import Count, QuerySet
from django.utils import timezone

from agents import loop_eval
from agents.guard import registry, terms
from agents.models import DailyRollup, Event, EventKind, LimitProfile, Task
from agents.selectors import breaker_trips, day_bounds, labelled_traces

# Every breaker trip's code, in a stable order (CSV columns, table columns).
TRIP_CODES = terms.TRIP_CODES

# Advice on a profile's limits needs at least MIN_SAMPLE tasks of it that ended in the period:
# a handful of quick runs once advised cutting a 900 s deadline to 3-4 s. A limit is flagged
# when it is more than LOOSE_FACTOR times the p95 of what those tasks used; the advice is p95 x
# 1.5 to 2, and never below the most any of them used (it would have cut that run short).
MIN_SAMPLE = 20
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
    most: Decimal | int  # the most one task of the sample used
    low: Decimal | int
    high: Decimal | int
    sample: int  # the tasks p95 and most were read from


@dataclass
class ProfileSample:
    """What the advisor saw of one profile in the period, with its advice when there is enough."""

    profile: str
    ended: int  # tasks of the profile that ended in the period: the sample
    trips: int  # breaker trips of its tasks in the period (`selectors.breaker_trips`)
    suggestions: list[Suggestion]

    @property
    def enough(self) -> bool:
        return self.ended >= MIN_SAMPLE


# (LimitProfile field, the task counter its usage is read from, None for the wall time from
# creation to the end): the limits the advice weighs, from the registry.
USAGE = tuple(
    (spec.name, None if spec.usage == registry.CLOCK else spec.usage)
    for spec in registry.LIMITS
    if spec.advised
)


def p95(values: list) -> Decimal | int:
    """Nearest-rank 95th percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def limit_advice(*, days: int, today: date | None = None) -> list[ProfileSample]:
    """Each profile whose tasks ended or tripped in the period, by name: how many ended, how
    many trips, and its limits far above what those tasks used.

    Only with at least MIN_SAMPLE ended tasks (any terminal state: a run that tripped used
    what it used too) is a limit flagged, when it is more than LOOSE_FACTOR times the p95
    usage; the advice is p95 x 1.5 to p95 x 2, raised to the most any one task used, rounded
    up (money to the cent), and only when it is below the limit.
    """
    first, _last = window(days, today=today)
    start, _end = day_bounds(first)
    fields = [usage for _limit, usage in USAGE if usage]
    ended = Task.objects.filter(
        state__in=terms.TERMINAL_STATES, profile__isnull=False, ended_at__gte=start
    ).values_list("profile_id", "created_at", "ended_at", *fields)
    by_profile: dict[int, list[tuple]] = {}
    for row in ended:
        by_profile.setdefault(row[0], []).append(row)
    trips = dict(
        breaker_trips(start=start)
        .filter(task__profile__isnull=False)
        .values_list("task__profile_id")
        .annotate(n=Count("id"))
    )
    samples: list[ProfileSample] = []
    for profile in LimitProfile.objects.filter(pk__in={*by_profile, *trips}).order_by("name"):
        rows = by_profile.get(profile.pk, [])
        sample = ProfileSample(profile.name, len(rows), trips.get(profile.pk, 0), [])
        if sample.enough:
            sample.suggestions = _suggestions(profile, rows, fields)
        samples.append(sample)
    return samples


def limit_suggestions(*, days: int, today: date | None = None) -> list[Suggestion]:
    """Every suggestion of `limit_advice`, profile by profile."""
    return suggestions_of(limit_advice(days=days, today=today))


def suggestions_of(advice: list[ProfileSample]) -> list[Suggestion]:
    """The suggestions of an advice already read, profile by profile."""
    return [s for sample in advice for s in sample.suggestions]


def _suggestions(profile: LimitProfile, rows: list[tuple], fields: list[str]) -> list[Suggestion]:
    found: list[Suggestion] = []
    for limit, usage in USAGE:
        if usage is None:
            values = [
                math.ceil((ended - created).total_seconds()) for _p, created, ended, *_ in rows
            ]
        else:
            index = 3 + fields.index(usage)
            values = [row[index] for row in rows]
        current = getattr(profile, limit)
        top, most = p95(values), max(values)
        if top <= 0 or current <= top * LOOSE_FACTOR:
            continue
        money = registry.BY_NAME[limit].kind == registry.MONEY
        low = _round_up(max(top * SUGGEST_LOW, most), money=money)
        high = max(_round_up(top * SUGGEST_HIGH, money=money), low)
        if low >= current:
            continue
        found.append(Suggestion(
            profile=profile.name, limit=limit, current=current, p95=top, most=most,
            low=low, high=high, sample=len(values),
        ))  # fmt: skip
    return found


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
    latest = (
        Event.objects.filter(kind=EventKind.STOP_LABELLED)
        .order_by("-pk")
        .values_list("pk", flat=True)
    )
    key = f"lw:threshold-advice:{latest.first() or 0}"
    cached = cache.get(key)
    if cached is not None:
        return cached or None
    # The tuning part only (the held-out part judges a choice, it never makes one), and the
    # lexical provider: the task limit's threshold scores lexically unless a tool policy says
    # otherwise, and this page must not wait for a model.
    shipped = loop_eval.load_traces(loop_eval.TUNING_DIR)
    labelled = labelled_traces()
    best = loop_eval.recommend(
        loop_eval.evaluate(shipped + labelled, provider_names=(loop_eval.LEXICAL,))
    )
    advice = (
        ThresholdAdvice(best.threshold or 0.0, best.precision, best.recall, len(shipped),
                        len(labelled))
        if best is not None
        else None
    )  # fmt: skip
    cache.set(key, advice or False, 3600)
    return advice
