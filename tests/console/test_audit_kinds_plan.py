"""The audit page's filter lists the kinds of event recorded without reading every event.

It used to take the DISTINCT kinds of the event table, a read of the whole table, which only
grows (every task adds events), at every view of the page. This test records many events of a
few kinds, gathers statistics, and reads from the plan (run, sequential scans off) how many
event rows the query looked at.
"""

from __future__ import annotations

import pytest
from django.db import connection

from agents.models import Event
from console import queries
from tests.api.plans import plans_of, rows_read, scans

MANY = 3000
KINDS = ["task_created", "guard_trigger", "task_stopped"]


def add_events(count: int) -> None:
    """`count` events spread over `KINDS`, in one statement."""
    table = Event._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (kind, actor, reason, code, detail, created_at) "
            f"SELECT (%s::text[])[1 + n %% 3], 'system:test', '', '', '{{}}', now() "
            f"FROM generate_series(1, %s) AS n",
            [KINDS, count],
        )
        cursor.execute(f"ANALYZE {table}")


@pytest.mark.django_db
def test_the_kinds_are_every_kind_recorded_in_order():
    for kind in ["token_issued", "agent_paused", "token_issued", "limits_changed"]:
        Event.objects.create(kind=kind, actor="system:test")
    assert queries.event_kinds() == ["agent_paused", "limits_changed", "token_issued"]


@pytest.mark.django_db
def test_no_event_no_kind():
    assert queries.event_kinds() == []


@pytest.mark.django_db
@pytest.mark.postgres
@pytest.mark.usefixtures("on_postgres")
def test_the_kinds_are_found_without_reading_every_event():
    add_events(MANY)

    plans = plans_of(queries.event_kinds, analyze=True)
    event_scans = [scan for plan in plans for scan in scans(plan, Event._meta.db_table)]

    assert event_scans
    assert sum(rows_read(scan) for scan in event_scans) <= 4 * len(KINDS), event_scans
    assert queries.event_kinds() == sorted(KINDS)
