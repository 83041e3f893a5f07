"""The console's search reads the tasks it finds, not every task (issue 43).

It matched a goal or external_ref in an OR with subqueries of the ledger, which made the whole
condition a filter over every task row. The ledger's ids are now read first, and the goal and
external_ref have trigram indexes (migration 0022): this test gives the table many tasks, one
with the words searched, and reads from the plan how many task rows the search looked at.
"""

from __future__ import annotations

import hashlib

import pytest

from agents.services import tasks
from console import queries
from tests.api.plans import clone_task, plans_of, rows_read, scans

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("on_postgres")]

TASKS = 20000


def test_a_search_reads_the_tasks_it_finds(agent):
    like = tasks.task_create(agent=agent, goal="reconcile invoice 7")
    clone_task(like, 100, TASKS, goal="'reconcile invoice ' || md5(n::text)")

    wanted = hashlib.md5(b"2999").hexdigest()  # noqa: S324 (a name, not a secret)
    found: list = []
    plans = plans_of(
        lambda: found.extend(queries.dashboard_tasks(q=wanted[:12].upper())[:50]), analyze=True
    )

    assert [task.goal for task in found] == [f"reconcile invoice {wanted}"]
    task_scans = [scan for plan in plans for scan in scans(plan, "agents_task")]
    assert task_scans
    read = [(scan.get("Index Name"), scan.get("Filter"), rows_read(scan)) for scan in task_scans]
    assert sum(rows for *_, rows in read) <= 10, read
