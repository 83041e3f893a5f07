"""The Celery app: background jobs that keep Loopwarden from going blind when agents die.

Configured from Django settings (the `CELERY_*` names). The broker comes from
`CELERY_BROKER_URL`: the embedded default `filesystem://` keeps messages in folders under the
data directory and needs no server; `redis://...` or `amqp://...` select Redis or RabbitMQ.

Beat runs the periodic jobs below; every one of them is idempotent, so a beat that fires twice,
or two beats by mistake, change nothing more than one.
"""

from __future__ import annotations

import os
from datetime import timedelta

from celery import Celery, Task, shared_task

from loopwarden import broker
from loopwarden.startup import one_line_on_config_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loopwarden.settings")
# `filesystem://`, the embedded broker, writes each message whole (see loopwarden/broker.py).
broker.register()

app = Celery("loopwarden")
app.config_from_object("django.conf:settings", namespace="CELERY")


@app.on_configure.connect
def _settings_read_or_one_line(sender: Celery, **_kwargs: object) -> None:
    """A worker or beat reads the settings here first: a bad value stops it with one line,
    as `manage.py` and gunicorn do, not with Celery's traceback."""
    from django.conf import settings

    with one_line_on_config_error():
        settings.INSTALLED_APPS  # noqa: B018 - reading one loads them all


# Each app's Celery jobs are in its `jobs` module (`tasks` would say domain tasks here).
app.autodiscover_tasks(related_name="jobs")

# The longest wait between two tries of a job that asks the outside world: the exponential
# backoff grows up to this and no further.
RETRY_BACKOFF_MAX_SECONDS = 600


def retried_job(
    *,
    name: str,
    base: type[Task],
    retry_on: type[Exception],
    backoff_seconds: int,
    max_retries: int,
):
    """The decorator of a job that asks the outside world (a webhook, a reconciler).

    `retry_on` is retried with exponential backoff from `backoff_seconds`, capped at
    RETRY_BACKOFF_MAX_SECONDS, at most `max_retries` times; then `base.on_failure` records the
    give-up. The job is bound (it may read `self.request.retries`) and keeps no result.
    `name` is the registered name, stable across module renames.
    """
    return shared_task(
        name=name,
        bind=True,
        base=base,
        ignore_result=True,
        autoretry_for=(retry_on,),
        retry_backoff=backoff_seconds,
        retry_backoff_max=RETRY_BACKOFF_MAX_SECONDS,
        max_retries=max_retries,
    )


def beat_schedule(
    *, sweep_seconds: int, rollup_seconds: int, prune_seconds: int = 0
) -> dict[str, dict]:
    """The periodic jobs. Sweeps share one interval; rollups of today run less often; the
    retention prune runs when `prune_seconds` is set (RETENTION_DAYS on)."""
    sweep = timedelta(seconds=sweep_seconds)
    # A sweep that is still queued when the next one is due is not worth running.
    expires = {"expires": max(sweep_seconds, 1)}
    schedule = {
        "sweep-leases": {
            "task": "agents.tasks.sweep_leases",
            "schedule": sweep,
            "options": expires,
        },
        "sweep-deadlines": {
            "task": "agents.tasks.sweep_deadlines",
            "schedule": sweep,
            "options": expires,
        },
        "sweep-reservations": {
            "task": "agents.tasks.sweep_reservations",
            "schedule": sweep,
            "options": expires,
        },
        "reconcile-unknown-operations": {
            "task": "ledger.tasks.reconcile_unknown_operations",
            "schedule": sweep,
            "options": expires,
        },
        "rollup-daily": {
            "task": "agents.tasks.rollup_daily",
            "schedule": timedelta(seconds=rollup_seconds),
            "options": {"expires": rollup_seconds},
        },
    }
    if prune_seconds:
        schedule["prune-trace"] = {
            "task": "agents.tasks.prune_trace",
            "schedule": timedelta(seconds=prune_seconds),
            "options": {"expires": prune_seconds},
        }
    return schedule


@app.on_after_configure.connect
def _install_beat_schedule(sender: Celery, **_kwargs) -> None:
    from django.conf import settings

    # A CELERY_BEAT_SCHEDULE in settings wins over the built-in one.
    if not sender.conf.beat_schedule:
        sender.conf.beat_schedule = beat_schedule(
            sweep_seconds=settings.SWEEP_INTERVAL_SECONDS,
            rollup_seconds=settings.ROLLUP_INTERVAL_SECONDS,
            prune_seconds=settings.PRUNE_INTERVAL_SECONDS if settings.RETENTION_DAYS else 0,
        )
