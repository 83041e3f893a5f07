"""Reads of the ledger: every question asked about operations, one definition each.

Two filters that look alike and are not the same question:

- unresolved (`UNRESOLVED_STATES`): nobody knows yet how the write ended, UNKNOWN or IN_FLIGHT
  whatever its lease. A task that touched one may not resume; notifications and the task page
  list them.
- waiting for a verdict (`operations_waiting_verdict`, `waits_for_verdict`): what the
  reconcile service accepts, UNKNOWN and IN_FLIGHT whose lease ran out (the lease sweep turns
  the second kind into UNKNOWN at its next run). The reconcile queue and the metrics count them.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from agents.guard import terms
from agents.models import Task, ToolCall
from ledger.models import Operation

UNRESOLVED_STATES = (terms.UNKNOWN, terms.IN_FLIGHT)


def is_unresolved(operation: Operation) -> bool:
    return operation.state in UNRESOLVED_STATES


def operations_touched(task: Task) -> QuerySet[Operation]:
    """Ledger rows any call of this task claimed or ran into (also another task's claim).
    The rows it claimed last are also found by their own `task` column: a task whose trace
    retention pruned still lists them."""
    # One set of ids, the union of the two ways in, not `id IN (calls' ids) OR task = t`: a
    # subquery in an OR is a filter over every ledger row (35 ms at 50,000 rows in the growth
    # bench, on every stop report and task page), where `IN (a UNION ALL b)` is a semi-join
    # that reads each id through the primary key (0.2 ms; tests/ledger/test_touched_plan.py).
    claimed = task.tool_call_rows.exclude(operation=None).order_by().values("operation_id")
    own = Operation.objects.filter(task=task).order_by().values("pk")
    return Operation.objects.filter(id__in=claimed.union(own, all=True))


def touches_unresolved(task: OuterRef) -> Q:
    """Whether the task `task` names touched a row nobody has settled (as `unresolved_operations`
    reads it): retention leaves such a task's trace for the reconcile and the resume."""
    return Q(Exists(Operation.objects.filter(task=task, state__in=UNRESOLVED_STATES))) | Q(
        Exists(ToolCall.objects.filter(task=task, operation__state__in=UNRESOLVED_STATES))
    )


def unresolved_operations(task: Task) -> QuerySet[Operation]:
    """The rows this task touched that nobody has settled: reconcile them before a resume."""
    return operations_touched(task).filter(state__in=UNRESOLVED_STATES)


def operations_of(task: Task) -> list[dict[str, str]]:
    """The task's ledger rows as the stop report lists them, oldest claim first."""
    return [
        {"key": key, "state": state}
        for key, state in operations_touched(task)
        .order_by("claimed_at", "id")
        .values_list("operation_key", "state")
    ]


def lease_over(operation: Operation, now: datetime) -> bool:
    return operation.lease_expires_at is None or operation.lease_expires_at <= now


def waits_for_verdict(operation: Operation, now: datetime) -> bool:
    """The row form of `operations_waiting_verdict`: may a verdict be recorded on it now?"""
    return operation.state == terms.UNKNOWN or (
        operation.state == terms.IN_FLIGHT and lease_over(operation, now)
    )


def operations_waiting_verdict(*, now: datetime | None = None) -> QuerySet[Operation]:
    """Operations waiting for a verdict: UNKNOWN, and IN_FLIGHT ones whose lease ran out.

    The lease sweep turns the second kind into UNKNOWN at its next run; the reconcile service
    accepts both, so both are waiting already.
    """
    now = now or timezone.now()
    return Operation.objects.filter(
        Q(state=terms.UNKNOWN) | Q(state=terms.IN_FLIGHT, lease_expires_at__lte=now)
    )


def reconcile_queue(
    *,
    agent: str = "",
    namespace: str = "",
    claimed_before: datetime | None = None,
    now: datetime | None = None,
) -> QuerySet[Operation]:
    """The reconcile queue: operations waiting for a verdict, oldest claim first, with their
    task and agent. Optional filters: the agent whose task claimed it (by name), its
    namespace, and claimed before a moment (older than an age)."""
    query = operations_waiting_verdict(now=now)
    if agent:
        query = query.filter(task__agent__name=agent)
    if namespace:
        query = query.filter(namespace=namespace)
    if claimed_before is not None:
        query = query.filter(claimed_at__lt=claimed_before)
    return (
        query.select_related("task__agent")
        .prefetch_related("reconciliations")
        .order_by("claimed_at", "id")
    )
