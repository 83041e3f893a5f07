"""The deadline sweep: a RUNNING task past its deadline stops PARTIAL/deadline, even when its
agent never calls again."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from agents.guard import terms
from agents.models import Phase
from agents.services import sweeps
from agents.services.operator import task_stop
from tests.celery.helpers import db_snapshot


def test_a_task_past_its_deadline_becomes_partial(make_task):
    task = make_task()
    later = task.deadline_at + timedelta(seconds=1)

    result = sweeps.sweep_deadlines(now=later)

    assert result.stopped == [str(task.pk)]
    task.refresh_from_db()
    assert (task.state, task.reason) == (terms.PARTIAL, "deadline")
    assert task.report["code"] == "GUARD_TIME_LIMIT"
    assert Phase.objects.get(task=task, number=1).end_reason == "deadline"
    assert task.events.filter(kind="task_stopped", actor="system:deadline_sweep").count() == 1


def test_a_task_within_its_deadline_is_left_alone(make_task):
    task = make_task()

    assert sweeps.sweep_deadlines(now=timezone.now()).stopped == []
    task.refresh_from_db()
    assert task.state == terms.RUNNING


def test_a_stopped_task_keeps_its_own_stop(make_task):
    task = make_task()
    task_stop(task_id=task.pk, reason="enough", actor="user:olivia")

    assert sweeps.sweep_deadlines(now=task.deadline_at + timedelta(hours=1)).stopped == []
    task.refresh_from_db()
    assert task.reason == "operator_stop"


def test_running_it_twice_changes_nothing_the_second_time(make_task):
    task = make_task()
    make_task(goal="Another one")
    later = task.deadline_at + timedelta(seconds=5)
    assert len(sweeps.sweep_deadlines(now=later).stopped) == 2
    before = db_snapshot()

    assert sweeps.sweep_deadlines(now=later + timedelta(seconds=5)).stopped == []
    assert db_snapshot() == before
