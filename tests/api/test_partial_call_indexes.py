"""The call tables' indexes hold only the rows they are read for (migration 0014): the
reservation sweep's index only model calls in flight, the operation index only tool calls that
have an operation. A usage report and a read's tool request write no entry in them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents import selectors
from agents.guard import terms
from agents.models import UNSETTLED, ModelCall, ToolCall
from agents.services import runner
from tests.api.plans import index_names, plans_of, scans

pytestmark = pytest.mark.django_db


def _index(model, name):
    (index,) = [i for i in model._meta.indexes if i.name == name]
    return index


def test_the_sweeps_index_is_on_the_calls_it_looks_for():
    index = _index(ModelCall, "mc_unsettled")
    assert index.fields == ["created_at"]
    assert index.condition == UNSETTLED


def test_a_tool_calls_operation_is_indexed_only_where_it_has_one():
    assert ToolCall._meta.get_field("operation").db_index is False
    index = _index(ToolCall, "tool_call_operation")
    assert index.fields == ["operation"]
    assert index.condition.children == [("operation__isnull", False)]


def _gate_and_settle(task, agent, n: int, settle: int) -> list[ModelCall]:
    calls = []
    for k in range(n):
        _t, call, outcome = runner.model_call_gate(task_id=task.pk, agent=agent, model="m")
        assert outcome.decision == terms.ALLOW
        if k < settle:
            runner.model_call_usage(task_id=task.pk, agent=agent, model_call_id=call.pk,
                                    prompt_tokens=10, completion_tokens=5)  # fmt: skip
        calls.append(call)
    return calls


def test_the_sweeps_candidates_are_the_unsettled_calls_oldest_first(agent_row, make_task):
    task = make_task()
    calls = _gate_and_settle(task, agent_row, 4, settle=1)
    later = timezone.now() + timedelta(seconds=1)
    found = selectors.unsettled_reservations(later, 10)
    assert found == [(c.pk, task.pk) for c in calls[1:]]
    assert selectors.unsettled_reservations(later, 2) == found[:2]
    assert selectors.unsettled_reservations(calls[0].created_at, 10) == []


def _indexed(index: str) -> set[str]:
    """The heap tuples (ctids) a btree index has an entry for, read from its leaf pages with
    pageinspect: every leaf tuple but the pivots (high keys), each row of a posting list."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        cursor.execute(
            "SELECT b FROM generate_series(1, pg_relation_size(%s) / "
            "current_setting('block_size')::int - 1) AS b, bt_page_stats(%s, b::int) AS s "
            "WHERE s.type = 'l'",
            [index, index],
        )
        found: set[str] = set()
        for (block,) in cursor.fetchall():
            cursor.execute(
                "SELECT unnest(coalesce(tids, ARRAY[htid]))::text "
                "FROM bt_page_items(%s, %s) WHERE htid IS NOT NULL",
                [index, block],
            )
            found.update(row[0] for row in cursor.fetchall())
    return found


def _where(model, rows) -> set[str]:
    """Where the current versions of `rows` are (their ctids)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT ctid::text FROM {model._meta.db_table} WHERE id = ANY(%s)",
            [[row.pk for row in rows]],
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.postgres
def test_a_usage_report_writes_no_entry_in_the_sweeps_index(on_postgres, agent_row, make_task):
    """A settled call's row, as its usage report left it, has no entry in the sweep's index
    (the index on every call had one: the report's update is not HOT); an unsettled call's
    has."""
    calls = _gate_and_settle(make_task(), agent_row, 6, settle=4)
    indexed = _indexed("mc_unsettled")
    assert _where(ModelCall, calls[:4]).isdisjoint(indexed)
    assert _where(ModelCall, calls[4:]) <= indexed


@pytest.mark.postgres
def test_a_reads_tool_request_writes_no_entry_in_the_operation_index(
    on_postgres, agent_row, make_task, start_write
):
    task = make_task()
    reads = []
    for page in range(5):
        _t, call, outcome = runner.tool_call_request(
            task_id=task.pk, agent=agent_row, tool="search", args={"page": page},
            effect=terms.READ,
        )  # fmt: skip
        assert outcome.decision == terms.EXECUTE
        reads.append(call)
    operation = start_write(task, key="invoice-7")
    (write,) = ToolCall.objects.filter(operation=operation)
    indexed = _indexed("tool_call_operation")
    assert _where(ToolCall, reads).isdisjoint(indexed)
    assert _where(ToolCall, [write]) <= indexed
    # An operation's tool calls are found through it (as its foreign key's ON DELETE looks
    # them up).
    (plan,) = plans_of(lambda: list(ToolCall.objects.filter(operation=operation)))
    (scan,) = scans(plan, ToolCall._meta.db_table)
    assert "tool_call_operation" in index_names(scan), scan


@pytest.mark.postgres
def test_the_sweep_reads_its_candidates_through_its_index(on_postgres, agent_row, make_task):
    _gate_and_settle(make_task(), agent_row, 3, settle=1)
    found: list = []
    (plan,) = plans_of(lambda: found.extend(selectors.unsettled_reservations(timezone.now(), 100)))
    assert len(found) == 2
    (scan,) = scans(plan, ModelCall._meta.db_table)
    assert "mc_unsettled" in index_names(scan), scan
