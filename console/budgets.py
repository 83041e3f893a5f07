"""Budget gauges: used against limit for every dimension a task is bounded by (the task page
draws each `Gauge` as a bar, the dashboard the busiest one).

Read from the task row alone (counters and limits live there), so a gauge costs no query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.utils import timezone

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
    """Every budget of the task. Time is measured to the task's end, or with `live` to now:
    the deadline keeps running while a stopped task waits for a person (the resume form)."""
    limits = task.limits
    now = now or timezone.now()

    def count(key: str, label: str, used: int, limit_name: str) -> Gauge:
        limit = int(limits.get(limit_name) or 0)
        return Gauge(key, label, count_text(used), count_text(limit), _ratio(used, limit))

    cost_used = task.cost_spent + task.cost_reserved
    max_cost = Decimal(str(limits.get("max_cost") or 0))
    reserved_note = f"{money(task.cost_reserved)} reserved" if task.cost_reserved else ""
    total = (task.deadline_at - task.created_at).total_seconds()
    until = now if live or task.ended_at is None else task.ended_at
    elapsed = (until - task.created_at).total_seconds()
    return [
        count("model_calls", "Model calls", task.model_calls, "max_model_calls"),
        count("tool_requests", "Tool requests", task.tool_requests, "max_tool_requests"),
        count("tool_executions", "Tool executions", task.tool_executions, "max_tool_executions"),
        count("retries", "Retries", task.retries, "max_retries"),
        count("polls", "Polls", task.polls, "max_polls"),
        _tokens(task, int(limits.get("max_tokens") or 0)),
        Gauge(
            "cost",
            "Cost",
            money(cost_used),
            money(max_cost),
            _ratio(cost_used, max_cost),
            reserved_note,
        ),  # fmt: skip
        Gauge("seconds", "Time", duration(elapsed), duration(total), _ratio(elapsed, total)),
        count("stagnant", "Steps without progress", task.stagnant, "max_stagnant"),
    ]


def _tokens(task: Task, limit: int) -> Gauge:
    """Like cost: open reservations count against the limit, as the gate counts them."""
    used = task.tokens_used + task.tokens_reserved
    note = f"{count_text(task.tokens_reserved)} reserved" if task.tokens_reserved else ""
    return Gauge("tokens", "Tokens", count_text(used), count_text(limit), _ratio(used, limit), note)


def busiest(task: Task) -> Gauge:
    """The budget closest to its limit: what the dashboard shows for a task in one bar."""
    main = [b for b in bars(task) if b.key in {"model_calls", "tool_requests",
                                                  "tool_executions", "tokens", "cost"}]  # fmt: skip
    return max(main, key=lambda b: b.ratio)
