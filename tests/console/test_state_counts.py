"""Counts of tasks by state come from the state deltas the task table's triggers append
(migration 0027), not from a count of every task (issue 43): they must stay equal to that count
through every road that changes a state, and through the fold of the deltas.

On SQLite, Django remakes a table to alter it and the remade table has no triggers: a later
migration that alters agents_task without creating them again fails these tests there.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models import Count
from django.utils import timezone

from agents import selectors
from agents.guard import terms
from agents.models import Task, TaskStateDelta
from agents.services import operator, retention, runner, state_counts, tasks
from tests.api.plans import clone_task, plans_of, scans

from .conftest import tool_step

pytestmark = pytest.mark.django_db


def counted() -> dict[str, int]:
    """The count the deltas replace: every task read."""
    return dict(Task.objects.order_by().values_list("state").annotate(n=Count("*")))


def agrees() -> dict[str, int]:
    found = selectors.task_counts_by_state()
    assert found == counted()
    return found


def test_the_counts_follow_create_stop_resume_complete_and_prune(agent, people):
    assert agrees() == {}
    first = tasks.task_create(agent=agent, goal="Find the enterprise price, again and again")
    second = tasks.task_create(agent=agent, goal="Answer once, with evidence")
    third = tasks.task_create(agent=agent, goal="Send the March invoices")
    assert agrees() == {terms.RUNNING: 3}

    for _ in range(10):  # the guard stops the first inside a decision
        _, outcome = tool_step(agent, first.pk)
        if outcome.decision == terms.STOP:
            break
    first.refresh_from_db()
    tripped = first.state  # PARTIAL or STOPPED, as the trip decided
    assert first.terminal
    operator.task_stop(task_id=third.pk, reason="not needed", user=people.operator)
    assert agrees() == {terms.RUNNING: 1, terms.STOPPED: 1, tripped: 1}

    runner.task_finish(task_id=second.pk, agent=agent, evidence={"revision": 1, "done": True})
    operator.task_resume(task_id=third.pk, user=people.admin, reason="needed after all")
    assert agrees() == {terms.RUNNING: 1, tripped: 1, terms.COMPLETED: 1}

    assert state_counts.state_counts_compact() > 3
    assert TaskStateDelta.objects.count() == 3  # a row a state
    assert agrees() == {terms.RUNNING: 1, tripped: 1, terms.COMPLETED: 1}

    operator.task_stop(task_id=third.pk, reason="done by hand", user=people.operator)
    result = retention.trace_prune(days=30, now=timezone.now() + timedelta(days=31))
    assert result.tasks == 3
    ended = {terms.STOPPED: 1, terms.COMPLETED: 1}
    ended[tripped] = ended.get(tripped, 0) + 1
    assert agrees() == ended
    state_counts.state_counts_compact()
    assert agrees() == ended

    Task.objects.filter(pk=second.pk).delete()  # no service deletes a task; the trigger counts it
    del ended[terms.COMPLETED]
    assert agrees() == ended


def test_a_fold_twice_changes_nothing(agent):
    tasks.task_create(agent=agent, goal="one")
    state_counts.state_counts_compact()
    state_counts.state_counts_compact()
    assert list(TaskStateDelta.objects.values_list("state", "n")) == [(terms.RUNNING, 1)]
    assert agrees() == {terms.RUNNING: 1}


@pytest.mark.postgres
@pytest.mark.usefixtures("on_postgres")
def test_a_bulk_insert_is_counted_in_a_row_a_state_and_the_read_reads_no_task(agent):
    like = tasks.task_create(agent=agent, goal="reconcile invoice 7")
    clone_task(like, 1, 5000, state="'COMPLETED'")
    assert TaskStateDelta.objects.count() == 2  # the create's row, the copies' statement's row
    assert agrees() == {terms.RUNNING: 1, terms.COMPLETED: 5000}

    (plan,) = plans_of(selectors.task_counts_by_state)
    assert scans(plan, "agents_task") == []
