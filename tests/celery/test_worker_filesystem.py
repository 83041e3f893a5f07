"""A real worker on the embedded broker (filesystem://): no server, folders in a data dir."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.guard import terms
from agents.jobs import sweep_deadlines
from agents.models import Task
from tests.celery.helpers import (
    celery_processes,
    filesystem_transport_options,
    wait_for,
    worker_args,
)

# Slow (a Celery worker process): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_a_worker_on_the_filesystem_broker_runs_what_the_app_enqueues(make_task, tmp_path):
    task = make_task()
    Task.objects.filter(pk=task.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    data_dir = tmp_path / "data"

    with celery_processes(
        broker_url="filesystem://", db_settings=connection.settings_dict, data_dir=data_dir
    ) as celery:
        celery.start("worker", *worker_args("fs"), ready=" ready.")
        celery.send(sweep_deadlines, transport_options=filesystem_transport_options(data_dir))

        wait_for(
            lambda: Task.objects.get(pk=task.pk).state != terms.RUNNING,
            timeout=30,
            message="the worker did not sweep the task",
            logs=celery.logs,
        )

    task.refresh_from_db()
    assert (task.state, task.reason) == (terms.PARTIAL, "deadline")
    assert task.events.filter(kind="task_stopped", actor="system:deadline_sweep").count() == 1
    assert (data_dir / "broker" / "queue").is_dir()
