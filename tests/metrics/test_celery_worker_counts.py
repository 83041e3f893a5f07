"""A real Celery worker's sweep counts reach a scrape served by another process: the worker
writes into the machine's metrics folder, the web process sums it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from agents.jobs import sweep_deadlines
from agents.models import Task
from tests.api.helpers import new_task
from tests.celery.helpers import (
    celery_processes,
    filesystem_transport_options,
    wait_for,
    worker_args,
)

# Slow (Celery worker and gunicorn processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow


@pytest.mark.django_db(transaction=True)
def test_a_sweep_run_by_a_worker_process_shows_in_the_web_scrape(agent_api, scrape, tmp_path):
    task = new_task(agent_api)["id"]
    Task.objects.filter(pk=task).update(deadline_at=timezone.now() - timedelta(seconds=1))
    data_dir = tmp_path / "data"
    before = scrape()

    with celery_processes(
        broker_url="filesystem://", db_settings=connection.settings_dict, data_dir=data_dir,
        PROMETHEUS_MULTIPROC_DIR=str(settings.PROMETHEUS_MULTIPROC_DIR),  # this machine's
    ) as celery:  # fmt: skip
        celery.start("worker", *worker_args("metrics"), ready=" ready.")
        celery.send(sweep_deadlines, transport_options=filesystem_transport_options(data_dir))
        wait_for(
            lambda: (
                scrape().value("loopwarden_sweep_runs_total", sweep="deadline")
                > before.value("loopwarden_sweep_runs_total", sweep="deadline")
            ),
            timeout=30,
            message="the worker's sweep never showed in a scrape",
            logs=celery.logs,
        )

    after = scrape()
    for name, labels, moved in [
        ("loopwarden_sweep_runs_total", {"sweep": "deadline"}, 1),
        ("loopwarden_sweep_rows_total", {"sweep": "deadline", "result": "stopped"}, 1),
        ("loopwarden_stops_total", {"reason": "deadline", "code": "GUARD_TIME_LIMIT"}, 1),
    ]:
        assert after.value(name, **labels) - before.value(name, **labels) == moved, name
