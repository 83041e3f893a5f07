"""Pieces every service shares: locking a task, numbering trace rows, prices, agent days."""

from __future__ import annotations

import uuid
from datetime import date
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db.models import F

from agents.errors import NotFound
from agents.guard import core
from agents.guard import types as g
from agents.models import Agent, AgentDay, ModelPrice, Task


def lock_task(task_id: uuid.UUID | str, *, agent: Agent | None = None) -> Task:
    """Take the task row lock (SELECT ... FOR NO KEY UPDATE) for the rest of the transaction.

    Every decision on a task runs under this lock, so gates, results, stops and resumes of one
    task are serialized whichever web worker handles them. NO KEY: the lock still excludes
    every other locker, but lets other transactions insert rows that reference the task
    (events, trace rows) without waiting for it. An agent only sees its own tasks: another
    agent's task is answered like a missing one.
    """
    query = Task.objects.select_for_update(no_key=True)
    if agent is not None:
        query = query.filter(agent=agent)
    try:
        return query.get(pk=task_id)
    except (Task.DoesNotExist, ValueError, ValidationError):  # not a UUID: 404
        raise NotFound("No such task.", code="TASK_NOT_FOUND") from None


def next_seq(task: Task) -> int:
    task.trace_seq += 1
    return task.trace_seq


def price_row(model: str) -> ModelPrice | None:
    """The model's price row, else the "*" row, else None (the model is free)."""
    rows = {row.model: row for row in ModelPrice.objects.filter(model__in=[model or "*", "*"])}
    return rows.get(model) or rows.get("*")


def price_of(model: str) -> tuple[Decimal, Decimal]:
    row = price_row(model)
    if row is None:
        return Decimal(0), Decimal(0)
    return row.input_per_million, row.output_per_million


def cost_of(model: str, prompt_tokens: int, completion_tokens: int) -> Decimal:
    per_in, per_out = price_of(model)
    return core.token_cost(per_in, per_out, prompt_tokens, completion_tokens)


def model_estimate(
    model: str, prompt_tokens: int, output_tokens: int, limits: g.Limits
) -> tuple[int, Decimal]:
    """(tokens, cost) a gate reserves: the caller's estimate, else the model's default in the
    price table, else the task's profile default (the rule is `core.model_estimate`)."""
    row = price_row(model)
    return core.model_estimate(
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        per_in=row.input_per_million if row else Decimal(0),
        per_out=row.output_per_million if row else Decimal(0),
        model_default=row.default_estimate_tokens if row else None,
        profile_default=limits.default_estimate_tokens,
    )


def lock_agent_day(agent_id: int, day: date) -> AgentDay:
    """The agent's money row for `day`, locked. Taken after the task lock, never before."""
    AgentDay.objects.bulk_create([AgentDay(agent_id=agent_id, day=day)], ignore_conflicts=True)
    return AgentDay.objects.select_for_update().get(agent_id=agent_id, day=day)


def agent_view(agent_id: int, day_row: AgentDay | None) -> g.AgentView:
    paused, cap = Agent.objects.filter(pk=agent_id).values_list("paused", "daily_cost_cap").get()
    spent = (day_row.spent + day_row.reserved) if day_row else Decimal(0)
    return g.AgentView(paused=paused, daily_cap=cap, spent_today=spent)


def move_day_money(
    agent_id: int, day: date, *, reserved: Decimal = Decimal(0), spent: Decimal = Decimal(0)
) -> None:
    """Add to (or, with negatives, release from) an agent day's reserved and spent money."""
    AgentDay.objects.bulk_create([AgentDay(agent_id=agent_id, day=day)], ignore_conflicts=True)
    AgentDay.objects.filter(agent_id=agent_id, day=day).update(
        reserved=F("reserved") + reserved, spent=F("spent") + spent
    )
