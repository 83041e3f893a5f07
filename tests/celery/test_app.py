"""The Celery app: its broker comes from settings, beat schedules every periodic job."""

from __future__ import annotations

from datetime import timedelta

import pytest

from loopwarden.celery import app, beat_schedule

PERIODIC = {
    "agents.tasks.sweep_leases",
    "agents.tasks.sweep_deadlines",
    "agents.tasks.sweep_reservations",
    "agents.tasks.rollup_daily",
    "ledger.tasks.reconcile_unknown_operations",
}


def test_every_job_is_registered():
    app.loader.import_default_modules()
    assert PERIODIC | {"agents.tasks.notify_needs_human", "ledger.tasks.check_operation"} <= set(
        app.tasks
    )


def test_beat_runs_the_sweeps_at_the_sweep_interval():
    schedule = beat_schedule(sweep_seconds=7, rollup_seconds=300)

    assert {entry["task"] for entry in schedule.values()} == PERIODIC
    sweeps = [e for e in schedule.values() if e["task"] != "agents.tasks.rollup_daily"]
    assert {e["schedule"] for e in sweeps} == {timedelta(seconds=7)}
    assert schedule["rollup-daily"]["schedule"] == timedelta(seconds=300)


def test_the_installed_schedule_uses_the_settings():
    from django.conf import settings

    installed = app.conf.beat_schedule
    assert installed["sweep-leases"]["schedule"] == timedelta(
        seconds=settings.SWEEP_INTERVAL_SECONDS
    )


def test_the_embedded_broker_needs_no_server():
    from django.conf import settings

    if not settings.CELERY_BROKER_URL.startswith("filesystem://"):
        pytest.skip("CELERY_BROKER_URL points elsewhere; this test is about the default")
    options = app.conf.broker_transport_options
    assert app.conf.broker_url.startswith("filesystem://")
    assert options["data_folder_in"].startswith(str(settings.DATA_DIR))
