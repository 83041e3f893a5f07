"""Pieces every service shares: numbering trace rows, prices, agent days.

Locking the task row and moving it to and from the guard core's state is `agents.taskrow`.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from agents.domains import from_micros, to_micros
from agents.guard import core, terms
from agents.models import Agent, AgentDay, Task
from agents.prepared import hot_cursor, write_later
from agents.services import catalog
from agents.services.catalog import Catalog


def catalog_of(task: Task) -> Catalog:
    """Prices and tool policies as of the version `lock_task` read with the lock."""
    return catalog.catalog_at(getattr(task, "catalog_version", None))


def next_seq(task: Task) -> int:
    task.trace_seq += 1
    return task.trace_seq


def cost_of(prices: Catalog, model: str, prompt_tokens: int, completion_tokens: int) -> Decimal:
    row = catalog.price_row(prices, model)
    if row is None:
        return Decimal(0)
    return core.token_cost(
        row.input_per_million, row.output_per_million, prompt_tokens, completion_tokens
    )


def model_estimate(
    prices: Catalog, model: str, prompt_tokens: int, output_tokens: int, limits: terms.Limits
) -> tuple[int, Decimal]:
    """(tokens, cost) a gate reserves: the caller's estimate, else the model's default in the
    price table, else the task's profile default (the rule is `core.model_estimate`)."""
    row = catalog.price_row(prices, model)
    return core.model_estimate(
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        per_in=row.input_per_million if row else Decimal(0),
        per_out=row.output_per_million if row else Decimal(0),
        model_default=row.default_estimate_tokens if row else None,
        profile_default=limits.default_estimate_tokens,
    )


def agent_view(agent: Agent, spent_today: Decimal = Decimal(0)) -> terms.AgentView:
    """The core's view of the agent: pass the `task.agent` that `lock_task` joined."""
    return terms.AgentView(
        paused=agent.paused, daily_cap=agent.daily_cost_cap, spent_today=spent_today
    )


def move_day_money(
    agent_id: int, day: date, *, reserved: Decimal = Decimal(0), spent: Decimal = Decimal(0)
) -> Decimal:
    """Add to (or, with negatives, release from) an agent day's reserved and spent money, and
    answer the day's total (spent + reserved) after the change.

    One statement, an upsert: it creates the day's row if missing, and its row lock (held to
    the end of the transaction) serializes every change to the agent's day, so racing gates
    each see the others' reservations. Taken after the task lock, never before.
    """
    sql, params = day_upsert(agent_id, day, reserved, spent)
    with hot_cursor() as cursor:
        cursor.execute(sql, params)
        day_spent, day_reserved = cursor.fetchone()
    return from_micros(day_spent + day_reserved)


def move_day_money_later(
    agent_id: int, day: date, *, reserved: Decimal = Decimal(0), spent: Decimal = Decimal(0)
) -> None:
    """`move_day_money` for a caller that does not need the day's total: inside
    `agents.prepared.writes_together` the upsert goes with the decision's other writes (its row
    lock is then taken with them, still after the task's), else it runs now."""
    sql, params = day_upsert(agent_id, day, reserved, spent)
    if not write_later(DEFAULT_DB_ALIAS, sql, params):
        with hot_cursor() as cursor:
            cursor.execute(sql, params)


def day_upsert(
    agent_id: int, day: date, reserved: Decimal, spent: Decimal
) -> tuple[str, list[Any]]:
    """The statement that adds to an agent day's money (inserting the row if it is missing)
    and its parameters, answering the day's spent and reserved: the day row's one upsert,
    for `move_day_money`, `move_day_money_later` and the bench's floor."""
    table = AgentDay._meta.db_table
    # Money columns hold whole millionths (`agents.domains.MoneyField`): integer arithmetic,
    # exact on every database. The inserted row holds what it can (a release has nothing to
    # release from; the CHECK constraints test the proposed row before the conflict is seen).
    sql = (
        f"INSERT INTO {table} (agent_id, day, spent, reserved) VALUES (%s, %s, %s, %s) "
        f"ON CONFLICT (agent_id, day) DO UPDATE SET "
        f"spent = {table}.spent + %s, reserved = {table}.reserved + %s "
        f"RETURNING spent, reserved"
    )
    spent_micros, reserved_micros = to_micros(spent), to_micros(reserved)
    return sql, [
        agent_id, day, max(spent_micros, 0), max(reserved_micros, 0), spent_micros,
        reserved_micros,
    ]  # fmt: skip
