"""A decision updates its task row in place on PostgreSQL (HOT: no index entry written), and
the console's list keeps its order, newest activity first, with an index (migration 0013)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.guard import terms
from agents.models import Task
from agents.services import runner
from console import queries

pytestmark = pytest.mark.django_db


def _indexed_columns(table: str) -> set[str]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return {column for info in found.values() if info["index"] for column in info["columns"]}


def test_no_index_holds_a_column_every_decision_changes():
    """Every decision writes `updated_at` and the counters: an index on any of them would
    make every task update write an entry in every index."""
    indexed = _indexed_columns(Task._meta.db_table)
    every_decision = {"updated_at", "trace_seq", "model_calls", "tool_requests", "window"}
    assert indexed & every_decision == set()
    assert "active_minute" in indexed


def test_active_minute_is_the_minute_of_updated_at_as_the_database_writes_it(make_task):
    task = make_task()
    stamp = timezone.now().replace(second=42, microsecond=123456)
    Task.objects.filter(pk=task.pk).update(updated_at=stamp)
    row = Task.objects.get(pk=task.pk)
    assert row.active_minute == stamp.replace(second=0, microsecond=0)
    # A write outside the ORM's saves moves it too: the database computes it.
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Task._meta.db_table} SET updated_at = %s WHERE id = %s",
            [stamp + timedelta(minutes=3), Task._meta.pk.get_db_prep_value(task.pk, connection)],
        )
    assert Task.objects.get(pk=task.pk).active_minute == stamp.replace(
        second=0, microsecond=0
    ) + timedelta(minutes=3)


def test_the_console_lists_tasks_by_their_last_activity_to_the_microsecond(make_task):
    """Within one minute and across minutes, the list is in `updated_at` order, newest first."""
    base = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=1)
    offsets = {"a": 10.5, "b": 10.25, "c": 61, "d": 59.999, "e": 0.0}  # seconds after `base`
    ids = {}
    for name, seconds in offsets.items():
        task = make_task(goal=name)
        Task.objects.filter(pk=task.pk).update(updated_at=base + timedelta(seconds=seconds))
        ids[task.pk] = name
    listed = [ids[t.pk] for t in queries.dashboard_tasks() if t.pk in ids]
    assert listed == sorted(offsets, key=offsets.get, reverse=True)  # c d a b e


@pytest.mark.postgres
def test_the_console_list_can_use_the_activity_index(on_postgres, make_task):
    for n in range(3):
        make_task(goal=f"task {n}")
    sql, params = queries.dashboard_tasks().query.sql_with_params()
    with connection.cursor() as cursor:
        # The tables are small: the planner is told to avoid what would only pay off on them
        # (a full scan, a full sort), to show what it does on a table of many tasks.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {sql} LIMIT 50", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "task_activity" in plan, plan


def _task_updates() -> tuple[int, int]:
    """All updates of task rows, and the HOT ones, as the statistics say (outside a transaction:
    this backend hands its counts over when it is idle, which the first statement asks for)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = %s",
            [Task._meta.db_table],
        )
        return cursor.fetchone()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_decisions_task_update_writes_no_index_entry(on_postgres, agent_row, make_task):
    """Forty decisions, each in its own transaction as in production: their task updates are
    HOT (at most a few are not, when a page has no room left before it is pruned)."""
    if connection.pg_version < 150000:
        pytest.skip("pg_stat_force_next_flush is PostgreSQL 15's")
    task = make_task()
    before = _task_updates()
    for n in range(10):
        _t, call, outcome = runner.model_call_gate(task_id=task.pk, agent=agent_row, model="m")
        assert outcome.decision == terms.ALLOW
        runner.model_call_usage(task_id=task.pk, agent=agent_row, model_call_id=call.pk,
                                prompt_tokens=10, completion_tokens=5)  # fmt: skip
        _t, tool, outcome = runner.tool_call_request(
            task_id=task.pk, agent=agent_row, tool="search", args={"page": n},
            effect=terms.READ, model_call_id=call.pk,
        )  # fmt: skip
        assert outcome.decision == terms.EXECUTE
        runner.tool_call_result(
            task_id=task.pk, agent=agent_row, tool_call_id=tool.pk,
            result=terms.ToolResult(kind="SUCCESS", data={"page": n},
                                    evidence={"revision": n + 1, "done": False}),
        )  # fmt: skip
    after = _task_updates()
    updates, hot = after[0] - before[0], after[1] - before[1]
    assert updates >= 40
    assert hot >= updates - 4, (updates, hot)


def test_a_new_tasks_active_minute_is_read_from_the_database_when_asked(make_task):
    """The INSERT does not read the generated column back; the instance loads it on first use."""
    task = make_task()
    assert "active_minute" in task.get_deferred_fields()
    assert task.active_minute == task.updated_at.replace(second=0, microsecond=0)
