"""Celery jobs of the ledger: asking reconcilers about UNKNOWN operations.

The registered names keep the module's former name (`ledger.tasks.<job>`), so queued
messages and beat schedules survive a deploy.
"""

from __future__ import annotations

from celery import Task as CeleryTask
from celery import shared_task
from django.conf import settings

from ledger import reconcilers
from loopwarden.celery import retried_job


@shared_task(name="ledger.tasks.reconcile_unknown_operations", ignore_result=True)
def reconcile_unknown_operations() -> int:
    """Periodic: queue one check per UNKNOWN operation of a tool with a reconciler."""
    operation_ids = reconcilers.operations_to_check()
    for operation_id in operation_ids:
        check_operation.delay(operation_id)
    return len(operation_ids)


class CheckJob(CeleryTask):
    """Once the bounded checks are spent, the operation's trail says so; it stays UNKNOWN."""

    def on_failure(self, exc, task_id, args, kwargs, einfo) -> None:
        operation_id = args[0] if args else kwargs["operation_id"]
        reconcilers.operation_check_gave_up(
            operation_id=operation_id, error=f"{type(exc).__name__}: {exc}"
        )


@retried_job(
    name="ledger.tasks.check_operation",
    base=CheckJob,
    retry_on=reconcilers.NoAnswer,
    backoff_seconds=settings.RECONCILE_BACKOFF_SECONDS,
    max_retries=settings.RECONCILE_MAX_CHECKS - 1,
)
def check_operation(self, operation_id: int) -> str | None:
    """Ask the reconciler once; no answer retries with exponential backoff, up to the bound."""
    outcome = reconcilers.operation_check(operation_id=operation_id, attempt=self.request.retries)
    return outcome.verdict
