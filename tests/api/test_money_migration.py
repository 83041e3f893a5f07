"""Agents 0017 turns the money a database holds into whole millionths, each amount exactly, and
back again."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from agents.models import Agent, AgentDay, DailyRollup, LimitProfile, ModelCall, ModelPrice, Task

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("agents", "0016_domain_checks")]

# table, column -> (what the old code left there, as SQL; the amount it stands for). On SQLite
# the old columns held binary floats: the sums below are a hair off there, as its in-place
# updates left them.
HELD = {
    ("agents_task", "cost_spent"): ("21.6654", "21.665400"),
    ("agents_task", "cost_reserved"): ("0.7 + 0.1 - 0.7", "0.100000"),
    ("agents_agentday", "spent"): ("99999999.999999", "99999999.999999"),
    ("agents_agentday", "reserved"): ("0.000001", "0.000001"),
    ("agents_modelcall", "reserved_cost"): ("2.194005 + 2.900343 + 0.008122", "5.102470"),
    ("agents_modelcall", "cost"): ("NULL", None),
    ("agents_limitprofile", "max_cost"): ("5.00", "5.000000"),
    ("agents_agent", "daily_cost_cap"): ("12.5", "12.500000"),
    ("agents_modelprice", "input_per_million"): ("0.15", "0.150000"),
    ("agents_modelprice", "output_per_million"): ("0", "0.000000"),
    ("agents_dailyrollup", "cost"): ("76.282967", "76.282967"),
}


def _rows_before(apps) -> None:
    """One row in each table with money, as the code before 0017 would have kept it."""
    profile = apps.get_model("agents", "LimitProfile").objects.create(name="migrated")
    agent = apps.get_model("agents", "Agent").objects.create(name="a", namespace="ns")
    apps.get_model("agents", "AgentDay").objects.create(agent=agent, day=date(2026, 12, 1))
    task = apps.get_model("agents", "Task").objects.create(
        agent=agent, profile=profile, goal="g", limits={}, deadline_at=timezone.now()
    )
    apps.get_model("agents", "ModelCall").objects.create(
        task=task, seq=1, phase=1, decision="ALLOW"
    )
    apps.get_model("agents", "ModelPrice").objects.create(model="m")
    apps.get_model("agents", "DailyRollup").objects.create(day=date(2026, 12, 1), agent=agent)
    with connection.cursor() as cursor:
        for (table, column), (sql, _amount) in HELD.items():
            where = " WHERE name = 'migrated'" if table == "agents_limitprofile" else ""
            cursor.execute(f'UPDATE {table} SET "{column}" = {sql}{where}')


def _held_after() -> dict[tuple[str, str], str | None]:
    """Each amount as the models read it now."""
    task = Task.objects.get()
    day, call = AgentDay.objects.get(), ModelCall.objects.get()
    price, rollup = ModelPrice.objects.get(), DailyRollup.objects.get()
    values = {
        ("agents_task", "cost_spent"): task.cost_spent,
        ("agents_task", "cost_reserved"): task.cost_reserved,
        ("agents_agentday", "spent"): day.spent,
        ("agents_agentday", "reserved"): day.reserved,
        ("agents_modelcall", "reserved_cost"): call.reserved_cost,
        ("agents_modelcall", "cost"): call.cost,
        ("agents_limitprofile", "max_cost"): LimitProfile.objects.get(name="migrated").max_cost,
        ("agents_agent", "daily_cost_cap"): Agent.objects.get().daily_cost_cap,
        ("agents_modelprice", "input_per_million"): price.input_per_million,
        ("agents_modelprice", "output_per_million"): price.output_per_million,
        ("agents_dailyrollup", "cost"): rollup.cost,
    }
    return {key: None if value is None else str(value) for key, value in values.items()}


def _held_before() -> dict[tuple[str, str], str | None]:
    """Each amount as the columns before 0017 hold it (read to six places, as Django did)."""
    held = {}
    with connection.cursor() as cursor:
        for table, column in HELD:
            where = " WHERE name = 'migrated'" if table == "agents_limitprofile" else ""
            cursor.execute(f'SELECT "{column}" FROM {table}{where}')
            (value,) = cursor.fetchone()
            held[table, column] = (
                None if value is None else str(Decimal(str(value)).quantize(Decimal("0.000001")))
            )
    return held


@pytest.mark.slow  # migrates the database back and forth
def test_every_amount_becomes_its_millionths_and_back():
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    try:
        _rows_before(MigrationExecutor(connection).loader.project_state(BEFORE).apps)

        MigrationExecutor(connection).migrate(leaves)
        expected = {key: amount for key, (_sql, amount) in HELD.items()}
        assert _held_after() == expected
        with connection.cursor() as cursor:
            cursor.execute("SELECT spent, reserved FROM agents_agentday")
            assert cursor.fetchone() == (99_999_999_999_999, 1)  # whole millionths

        MigrationExecutor(connection).migrate(BEFORE)
        assert _held_before() == expected
    finally:
        MigrationExecutor(connection).migrate(leaves)
