"""Celery jobs of the agents app. Thin: each takes ids, calls one service and returns a summary.

Every job is idempotent (see the services), so beat firing twice, a retry or a message
delivered twice changes nothing more than one run.
"""

from __future__ import annotations

from datetime import date, timedelta

from celery import Task, shared_task
from django.conf import settings
from django.utils import timezone

from agents import metrics
from agents.models import Notification
from agents.services import notify, rollups, sweeps
from loopwarden.celery import retried_job


@shared_task(ignore_result=True)
def sweep_leases() -> dict[str, int]:
    return _counted("lease", sweeps.sweep_leases())


@shared_task(ignore_result=True)
def sweep_deadlines() -> dict[str, int]:
    return _counted("deadline", sweeps.sweep_deadlines())


@shared_task(ignore_result=True)
def sweep_reservations() -> dict[str, int]:
    return _counted("reservation", sweeps.sweep_reservations())


def _counted(sweep: str, result: sweeps.SweepResult) -> dict[str, int]:
    """The run's summary, also counted for Prometheus (loopwarden_sweep_*)."""
    summary = result.as_dict()
    metrics.sweep_counted(sweep, **summary)
    return summary


class NotifyJob(Task):
    """Once the retries are spent, the failure is recorded on the row and logged."""

    def on_failure(self, exc, task_id, args, kwargs, einfo) -> None:
        params = dict(zip(("task_id", "phase", "kind"), args, strict=False)) | kwargs
        params.setdefault("kind", Notification.NEEDS_HUMAN)
        notify.notification_give_up(**params, error=f"{type(exc).__name__}: {exc}")


@retried_job(
    base=NotifyJob,
    retry_on=notify.DeliveryFailed,
    backoff_seconds=settings.NOTIFY_BACKOFF_SECONDS,
    max_retries=settings.NOTIFY_MAX_RETRIES,
)
def notify_needs_human(
    self, task_id: str, phase: int, kind: str = Notification.NEEDS_HUMAN
) -> list[str] | None:
    """Tell operators once that (task, phase) needs them. Enqueued on commit by the stop."""
    row = notify.notification_send(task_id=task_id, phase=phase, kind=kind)
    return row.channels if row else None


@shared_task(ignore_result=True)
def rollup_daily(day: str | None = None) -> int:
    """Rebuild the report rows of `day` (ISO date); by default today and yesterday (UTC).

    Yesterday is rebuilt too so the last minutes before midnight are never left out.
    """
    if day:
        days = [date.fromisoformat(day)]
    else:
        today = timezone.now().date()
        days = [today - timedelta(days=1), today]
    return sum(rollups.rollup_day(day=d) for d in days)
