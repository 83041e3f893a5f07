"""Reconciling UNKNOWN operations: an operator's or a reconciler's verdict, append-only."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.errors import BadInput, Conflict, NotFound
from agents.guard import types as g
from agents.models import Event
from agents.services.common import lock_task
from agents.services.snapshot import apply_state, release_execution, to_state
from ledger.models import Operation, Reconciliation

VERDICTS = (g.OP_COMMITTED, g.NOT_COMMITTED, g.UNKNOWN)


def operation_reconcile(
    *,
    operation_id: int,
    verdict: str,
    note: str,
    actor: str,
    user=None,
    result: Any = None,
    evidence: Any = None,
    automatic: bool = False,
) -> Operation:
    """Record a verdict on an UNKNOWN operation (or an IN_FLIGHT one whose lease expired).

    Locks the claiming task's row, then the operation row: the lock order of every service
    (task, then operation). COMMITTED stores the result (later requests get REUSE);
    NOT_COMMITTED lets the key execute again; UNKNOWN records the note and changes nothing.
    """
    if verdict not in VERDICTS:
        raise BadInput(
            f"verdict must be one of {', '.join(VERDICTS)}.",
            code="BAD_VERDICT",
            fields={"verdict": "invalid"},
        )
    if not (note or "").strip():
        raise BadInput("A note is required.", code="NOTE_REQUIRED", fields={"note": "required"})
    now = timezone.now()
    with transaction.atomic():
        try:
            # The task first. The audit event below references the task, and on PostgreSQL
            # that insert waits for the task row lock; holding the operation meanwhile
            # deadlocked with a tool request that holds the task and waits for the operation.
            task_id = Operation.objects.values_list("task_id", flat=True).get(pk=operation_id)
            task = lock_task(task_id)
            operation = Operation.objects.select_for_update().get(pk=operation_id)
        except (Operation.DoesNotExist, ValueError):
            raise NotFound("No such operation.", code="OPERATION_NOT_FOUND") from None
        lease_over = operation.lease_expires_at is None or operation.lease_expires_at <= now
        if not (operation.state == g.UNKNOWN or (operation.state == g.IN_FLIGHT and lease_over)):
            raise Conflict(
                f"Operation {operation.operation_key} is {operation.state}; only UNKNOWN "
                "operations are reconciled.",
                code="OPERATION_NOT_UNKNOWN",
            )
        previous = operation.state
        if verdict == g.OP_COMMITTED:
            operation.state = g.OP_COMMITTED
            operation.result = result
            operation.committed_at = now
        elif verdict == g.NOT_COMMITTED:
            operation.state = g.NOT_COMMITTED
        else:
            operation.state = g.UNKNOWN
        operation.lease_expires_at = None
        operation.save()
        # Whatever the verdict, the claiming execution is no longer in flight: it leaves its
        # task's pending set, so it never counts again as a pending repeat.
        state = to_state(task)
        if release_execution(task, state, operation.tool_call, now):
            apply_state(task, state)
            task.save()
        Reconciliation.objects.create(
            operation=operation, verdict=verdict, previous_state=previous, note=note,
            result=result, evidence=evidence, actor=actor, actor_user=user, automatic=automatic,
        )  # fmt: skip
        Event.objects.create(
            task_id=operation.task_id, agent_id=operation.task.agent_id, operation=operation,
            kind="operation_reconciled", actor=actor, actor_user=user, reason=note,
            detail={"operation_key": operation.operation_key, "verdict": verdict,
                    "previous_state": previous, "automatic": automatic},
        )  # fmt: skip
    return operation
