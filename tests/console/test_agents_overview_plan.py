"""The agents page counts each agent's running tasks from the running tasks only.

It used to join every task of every agent and count the RUNNING ones in the aggregate: a read
of the whole task table, which only grows, at every view of the page. These tests read the
plans of the page's queries (sequential scans off, so that a small test table does not hide
the choice) and check that the task table is only read through the state index.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from agents.guard import terms
from agents.services import tasks
from console import queries
from tests.api.plans import scans

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("on_postgres")]


def plans_of(run) -> list[dict]:
    """The plans of the queries `run()` sends, as EXPLAIN prints them with seqscans off."""
    sent: list[tuple[str, list]] = []

    def capture(execute, sql, params, many, context):
        sent.append((sql, params))
        return execute(sql, params, many, context)

    plans = []
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        with connection.execute_wrapper(capture):
            run()
        for sql, params in sent:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
            (plan,) = cursor.fetchone()
            plans.append(plan[0]["Plan"] if isinstance(plan, list) else plan)
    return plans


def index_names(node: dict) -> set[str]:
    names = {node["Index Name"]} if "Index Name" in node else set()
    for child in node.get("Plans", []):
        names |= index_names(child)
    return names


def test_running_tasks_are_counted_through_the_state_index(agent):
    tasks.task_create(agent=agent, goal="running")
    done = tasks.task_create(agent=agent, goal="done")
    done.state, done.reason = terms.COMPLETED, "goal_met"
    done.save()

    task_scans = [
        scan for plan in plans_of(queries.agents_overview) for scan in scans(plan, "agents_task")
    ]

    assert task_scans
    assert all(index_names(scan) == {"task_state_deadline"} for scan in task_scans), task_scans
    (agent,) = queries.agents_overview()
    assert agent.running == 1
