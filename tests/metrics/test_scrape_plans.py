"""A scrape's database gauges read indexes, not whole tables.

The task table and the agents' day rows only grow. Counting tasks by state with `count(id)`
read every task row (419 ms at a million tasks on the development machine), `count(*)` every
entry of the (state, deadline) index (51 ms); the counts are now the sums of the state deltas
the task table's triggers append (a few rows). The money of the day summed every
day row of every agent (36 ms at 1.1 million rows) for want of an index on the day. These
tests read the plans PostgreSQL makes for the two queries when it may choose freely among the
indexes (sequential scans off, so that a small test table does not hide the choice).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from agents import selectors
from tests.api.plans import index_names, plans_of, scans

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("on_postgres")]


def test_tasks_by_state_are_summed_from_the_state_deltas_not_counted(make_task):
    make_task(goal="one task")

    (plan,) = plans_of(selectors.task_counts_by_state)

    # The triggers' deltas (migration 0027): no task row and no task index is read.
    assert scans(plan, "agents_task") == []
    assert scans(plan, "agents_taskstatedelta")


def test_the_days_money_is_summed_through_the_day_index(agent_row):
    # A year and more of the agent's earlier days, with statistics: the plan is the one a
    # table that has grown gets, not a tie between two indexes of an empty one.
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO agents_agentday (agent_id, day, spent, reserved) "
            "SELECT %s, CURRENT_DATE - n, 1, 0 FROM generate_series(1, 2000) n",
            [agent_row.pk],
        )
        cursor.execute("ANALYZE agents_agentday")

    (plan,) = plans_of(lambda: selectors.spend_on(timezone.now().date()))
    (scan,) = scans(plan, "agents_agentday")

    assert index_names(scan) == {"agent_day_day"}, scan


def test_the_days_trips_are_read_through_the_event_time_index(make_task):
    # Events only grow (every decision that stops, every operator action): the day's trips are
    # found through the time index, whatever the log holds from earlier days.
    task = make_task(goal="one task")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO agents_event (task_id, kind, actor, reason, code, detail, created_at) "
            "SELECT %s, 'task_stopped', 'system:guard', '', 'GUARD_LEDGER', "
            "'{\"reason\": \"unknown_commit\"}', now() - n * interval '1 hour' "
            "FROM generate_series(30, 5000) n",
            [task.pk],
        )
        cursor.execute("ANALYZE agents_event")

    (plan,) = plans_of(lambda: selectors.trips_on(timezone.now().date()))
    (scan,) = scans(plan, "agents_event")

    assert scan["Node Type"] != "Seq Scan"
    assert any("created_at" in name for name in index_names(scan)), scan
