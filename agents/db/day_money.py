"""The agent day's money, moved by one upsert whose row lock serializes the agent's gates."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from agents.db.domains import from_micros, to_micros
from agents.db.prepared import hot_cursor, write_later
from agents.models import AgentDay


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
    `agents.db.prepared.writes_together` the upsert goes with the decision's other writes (its row
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
    # Money columns hold whole millionths (`agents.db.domains.MoneyField`): integer arithmetic,
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
