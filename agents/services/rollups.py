"""Daily rollups for the report: usage and breaker trips (`selectors.breaker_trips`) per day,
agent and task type.

A rollup row is derived data, rebuilt from the trace (model calls, tool calls, stop events) for
a whole UTC day at a time, so rebuilding a day any number of times gives the same rows.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

from django.db import connection, transaction
from django.db.models import Case, Count, F, Q, Sum, Value, When
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from agents.db.domains import MoneyField
from agents.guard import terms
from agents.models import DailyRollup, ModelCall, ToolCall
from agents.selectors import breaker_trips, day_bounds, trace_pruned_between
from agents.services.retention import MIN_DAYS

CENT_MICROS = Decimal("0.000001")
_money = MoneyField()

# What a model call cost its agent: the settled cost; a reservation the sweep charged as
# reserved; both, when the usage arrived after that (the larger one, see model_call_usage).
CHARGED = Case(
    When(expired=True, settled_at=None, then=F("reserved_cost")),
    When(expired=True, then=Greatest(F("cost"), F("reserved_cost"))),
    When(settled_at__isnull=False, then=F("cost")),
    default=Value(Decimal(0), output_field=_money),
    output_field=_money,
)


def _empty() -> dict:
    return {"model_calls": 0, "tool_executions": 0, "tokens": 0, "cost": Decimal(0), "trips": {}}


def rollup_day(*, day: date) -> int:
    """Rebuild the rollup rows of one UTC day; returns how many rows the day has.

    Upserts one row per (agent, profile) that had activity and deletes rows of that day that
    no longer have any (a task deleted since). A day whose trace retention pruned in part is
    left as it is: its rows are the only history left of it. Runs in one transaction; two
    rebuilds of a day racing each other both write the same numbers.
    """
    with transaction.atomic():
        serial_plans()
        return _rollup_day(day)


def serial_plans() -> None:
    """No parallel workers for the rest of this transaction (PostgreSQL). A day's trace rows
    are found through the BRIN indexes, whose cost PostgreSQL estimates by the table's size: on
    a year of history it planned the day's few thousand calls with two workers, whose start
    cost more than the query (the rollup job 38-45 ms with them, 18-21 ms without, on the
    growth bench's 200,000 tasks), on cores the decisions need."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")


def _rollup_day(day: date) -> int:
    start, end = day_bounds(day)
    # Retention removes only rows older than MIN_DAYS: a recent day (the beat job's today and
    # yesterday) needs no look.
    if start < timezone.now() - timedelta(days=MIN_DAYS) and trace_pruned_between(start, end):
        return DailyRollup.objects.filter(day=day).count()
    in_day = Q(created_at__gte=start, created_at__lt=end)
    key = ("task__agent_id", "task__profile__name")
    totals: dict[tuple[int, str], dict] = defaultdict(_empty)
    model_calls = (
        ModelCall.objects.filter(in_day, decision=terms.ALLOW)
        .values(*key)
        .annotate(
            calls=Count("id"),
            tokens=Sum(Coalesce("prompt_tokens", 0) + Coalesce("completion_tokens", 0)),
            cost=Sum(CHARGED),
        )
    )
    for row in model_calls:
        entry = totals[(row["task__agent_id"], row["task__profile__name"] or "")]
        entry["model_calls"] = row["calls"]
        entry["tokens"] = row["tokens"] or 0
        entry["cost"] = Decimal(row["cost"] or 0).quantize(CENT_MICROS)
    executions = (
        ToolCall.objects.filter(in_day, decision=terms.EXECUTE).values(*key).annotate(n=Count("id"))
    )
    for row in executions:
        entry = totals[(row["task__agent_id"], row["task__profile__name"] or "")]
        entry["tool_executions"] = row["n"]
    trips = breaker_trips(start=start, end=end).values(*key, "code").annotate(n=Count("id"))
    for row in trips:
        entry = totals[(row["task__agent_id"], row["task__profile__name"] or "")]
        entry["trips"][row["code"]] = row["n"]
    now = timezone.now()
    rows = [
        DailyRollup(day=day, agent_id=agent_id, profile=profile, updated_at=now, **values)
        for (agent_id, profile), values in totals.items()
    ]
    with transaction.atomic():
        stale = [
            pk
            for pk, agent_id, profile in DailyRollup.objects.filter(day=day).values_list(
                "pk", "agent_id", "profile"
            )
            if (agent_id, profile) not in totals
        ]
        DailyRollup.objects.filter(pk__in=stale).delete()
        DailyRollup.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["day", "agent", "profile"],
            update_fields=["model_calls", "tool_executions", "tokens", "cost", "trips",
                           "updated_at"],
        )  # fmt: skip
    return len(rows)
