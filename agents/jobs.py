"""Celery jobs of the agents app. Thin: each takes ids, calls one service and returns a summary.

Every job is idempotent (see the services), so beat firing twice, a retry or a message
delivered twice changes nothing more than one run.

The registered names keep the module's former name (`agents.tasks.<job>`): messages queued
before a deploy, and beat schedules, still find their job.
"""

from __future__ import annotations

from datetime import date, timedelta

from celery import Task as CeleryTask
from celery import shared_task
from django.conf import settings
from django.dispatch import receiver
from django.utils import timezone

from agents import metrics
from agents.models import Notification
from agents.services import notify, retention, rollups, state_counts, stops, sweeps
from loopwarden.celery import retried_job


@shared_task(name="agents.tasks.sweep_leases", ignore_result=True)
def sweep_leases() -> dict[str, int]:
    return _counted("lease", sweeps.sweep_leases())


@shared_task(name="agents.tasks.sweep_deadlines", ignore_result=True)
def sweep_deadlines() -> dict[str, int]:
    return _counted("deadline", sweeps.sweep_deadlines())


@shared_task(name="agents.tasks.sweep_reservations", ignore_result=True)
def sweep_reservations() -> dict[str, int]:
    return _counted("reservation", sweeps.sweep_reservations())


def _counted(sweep: str, result: sweeps.SweepResult) -> dict[str, int]:
    """The run's summary, also counted for Prometheus (loopwarden_sweep_*)."""
    summary = result.as_dict()
    metrics.sweep_counted(sweep, **summary)
    return summary


class NotifyJob(CeleryTask):
    """Once the retries are spent, the failure is recorded on the row and logged."""

    def on_failure(self, exc, task_id, args, kwargs, einfo) -> None:
        params = dict(zip(("task_id", "phase", "kind"), args, strict=False)) | kwargs
        params.setdefault("kind", Notification.NEEDS_HUMAN)
        notify.notification_give_up(**params, error=f"{type(exc).__name__}: {exc}")


@retried_job(
    name="agents.tasks.notify_needs_human",
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


@receiver(stops.notification_due, dispatch_uid="agents.jobs.notify_needs_human")
def _enqueue_notification(sender, *, task_id: str, phase: int, kind: str, **_kwargs) -> None:
    """A stop that needs an operator committed: queue the notification job."""
    notify_needs_human.delay(task_id, phase, kind)


@shared_task(name="agents.tasks.rollup_daily", ignore_result=True)
def rollup_daily(day: str | None = None) -> int:
    """Rebuild the report rows of `day` (ISO date); by default today and yesterday (UTC).

    Yesterday is rebuilt too so the last minutes before midnight are never left out. The
    counts of tasks by state are folded here too (`state_counts.state_counts_compact`).
    """
    state_counts.state_counts_compact()
    if day:
        days = [date.fromisoformat(day)]
    else:
        today = timezone.now().date()
        days = [today - timedelta(days=1), today]
    return sum(rollups.rollup_day(day=d) for d in days)


PRUNE_MAX_TASKS = 20_000  # tasks one run prunes; the next run takes the rest


@shared_task(name="agents.tasks.prune_trace", ignore_result=True)
def prune_trace() -> dict[str, int]:
    """Remove the trace of tasks ended more than RETENTION_DAYS ago (nothing when it is 0)."""
    if not settings.RETENTION_DAYS:
        return {}
    result = retention.trace_prune(days=settings.RETENTION_DAYS, max_tasks=PRUNE_MAX_TASKS)
    return result.as_dict()
