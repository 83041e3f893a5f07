"""A deep page of the task list starts at its cursor (issue 43).

The cursor's condition was `created_at < t OR (created_at = t AND id < last)`: no index range
can start from an OR, so PostgreSQL walked the time index from the newest task and filtered
every row newer than the cursor; a page a year deep read a year of tasks. Now the condition
leads with `created_at <= t`, a range of the index. This test gives the list many tasks, asks
for a page in the middle and reads from the plan how many task rows it looked at.
"""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from agents.api import pagination
from agents.models import Task
from agents.services import tasks
from tests.api.plans import clone_task, plans_of, rows_read, scans

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("on_postgres")]

TASKS = 3000
LIMIT = 20


def test_a_deep_page_reads_its_own_rows_not_every_newer_one(agent_row):
    like = tasks.task_create(agent=agent_row, goal="one of many")
    clone_task(like, 1, TASKS, created_at="created_at - n * INTERVAL '1 minute'")
    deep = Task.objects.order_by("-created_at", "-pk")[TASKS // 2]  # as many rows on each side
    cursor_text = f"{pagination._micros(deep.created_at)}.{deep.pk.hex}"
    request = RequestFactory().get("/api/v1/tasks", {"cursor": cursor_text, "limit": LIMIT})
    request.query_params = request.GET

    pages: list = []
    plans = plans_of(
        lambda: pages.append(pagination.newest_first(request, Task.objects)), analyze=True
    )

    rows, _next = pages[0]
    assert len(rows) == LIMIT
    assert rows[0].created_at < deep.created_at
    task_scans = [scan for plan in plans for scan in scans(plan, "agents_task")]
    assert task_scans
    assert sum(rows_read(scan) for scan in task_scans) <= 2 * LIMIT + 2, task_scans
