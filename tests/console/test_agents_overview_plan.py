"""The agents page counts each agent's running tasks from the running tasks only.

It used to join every task of every agent and count the RUNNING ones in the aggregate: a read
of the whole task table, which only grows, at every view of the page. This test gives an agent
many finished tasks and a few running ones, gathers statistics, and reads from the plans of the
page's queries (run, sequential scans off) how many task rows they looked at.
"""

from __future__ import annotations

import pytest
from django.db import connection

from agents.guard import terms
from agents.models import Task
from agents.services import tasks
from console import queries
from tests.api.plans import plans_of, rows_read, scans

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("on_postgres")]


FINISHED = 2000
RUNNING = 3


def add_finished_tasks(like: Task, count: int) -> None:
    """`count` COMPLETED copies of `like`, in one statement."""
    columns = [f.column for f in Task._meta.concrete_fields
               if not f.generated and f.column not in ("id", "state", "reason")]  # fmt: skip
    listed = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO agents_task (id, state, reason, {listed}) "
            f"SELECT gen_random_uuid(), %s, %s, {listed} FROM agents_task, "
            f"generate_series(1, %s) WHERE id = %s",
            [terms.COMPLETED, "goal_met", count, like.pk],
        )
        cursor.execute("ANALYZE agents_task")


def test_running_tasks_are_counted_from_the_running_tasks_only(agent):
    for n in range(RUNNING):
        tasks.task_create(agent=agent, goal=f"running {n}")
    done = tasks.task_create(agent=agent, goal="done")
    done.state, done.reason = terms.COMPLETED, "goal_met"
    done.save()
    add_finished_tasks(done, FINISHED)

    plans = plans_of(queries.agents_overview, analyze=True)
    task_scans = [scan for plan in plans for scan in scans(plan, "agents_task")]

    assert task_scans
    assert sum(rows_read(scan) for scan in task_scans) <= 2 * RUNNING, task_scans
    (agent,) = queries.agents_overview()
    assert agent.running == RUNNING
