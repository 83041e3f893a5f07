"""Budget gauges: used against limit for every dimension a task is bounded by (the task page
draws each `Gauge` as a bar, the dashboard the busiest one).

Read from the task row alone (counters and limits live there), so a gauge costs no query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.utils import timezone

from agents.guard import registry
from agents.models import Task
from console.templatetags.console_formats import count as count_text
from console.templatetags.console_formats import duration, money

WARN_AT = 0.7  # amber from here
HIGH_AT = 0.9  # red from here


@dataclass(frozen=True)
class Gauge:
    """One budget of a task: how much is used of its limit, as text and as a ratio."""

    key: str
    label: str
    used: str
    limit: str
    ratio: float
    note: str = ""

    @property
    def percent(self) -> int:
        return max(0, min(100, round(self.ratio * 100)))

    @property
    def level(self) -> str:
        if self.ratio >= HIGH_AT:
            return "high"
        if self.ratio >= WARN_AT:
            return "warn"
        return "ok"


def _ratio(used: float | Decimal, limit: float | Decimal) -> float:
    if not limit:
        return 1.0 if used else 0.0
    return float(used) / float(limit)


def bars(task: Task, now: datetime | None = None, *, live: bool = False) -> list[Gauge]:
    """Every budget of the task: each limit of the registry measured by a counter, as the
    guard counts it (`registry.used`: open reservations count too). Time is measured to the
    task's end, or with `live` to now: the deadline keeps running while a stopped task waits
    for a person (the resume form)."""
    now = now or timezone.now()
    gauges = []
    for spec in sorted(_MEASURED, key=lambda spec: spec.grant is None):
        if spec.usage == registry.CLOCK:
            gauges.append(_time(task, now, live))
        else:
            gauges.append(_gauge(task, spec))
    return gauges


_MEASURED = tuple(spec for spec in registry.TASK_LIMITS if spec.usage)


def _gauge(task: Task, spec: registry.Limit) -> Gauge:
    key = spec.grant or spec.usage or spec.name
    taken = registry.used(spec, task)
    reserved = getattr(task, spec.reserved) if spec.reserved else 0
    if spec.kind == registry.MONEY:
        limit: int | Decimal = Decimal(str(task.limits.get(spec.name) or 0))
        note = f"{money(reserved)} reserved" if reserved else ""
        return Gauge(key, spec.title, money(taken), money(limit), _ratio(taken, limit), note)
    limit = int(task.limits.get(spec.name) or 0)
    note = f"{count_text(reserved)} reserved" if reserved else ""
    return Gauge(key, spec.title, count_text(taken), count_text(limit), _ratio(taken, limit), note)


def _time(task: Task, now: datetime, live: bool) -> Gauge:
    total = (task.deadline_at - task.created_at).total_seconds()
    until = now if live or task.ended_at is None else task.ended_at
    elapsed = (until - task.created_at).total_seconds()
    return Gauge("seconds", "Time", duration(elapsed), duration(total), _ratio(elapsed, total))


def busiest(task: Task) -> Gauge:
    """The budget closest to its limit: what the dashboard shows for a task in one bar."""
    main = [b for b in bars(task) if b.key in {"model_calls", "tool_requests",
                                                  "tool_executions", "tokens", "cost"}]  # fmt: skip
    return max(main, key=lambda b: b.ratio)
