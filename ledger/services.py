"""The operation's whole life in the ledger: claim, settle, lease expiry and reconcile.

The task-level decisions stay in `agents.services` (the runner, the sweeps): they lock the task
row, ask the guard core, and call these for the operation row. Every function here that takes
a `task` runs under that task's row lock; see `agents.taskrow` for the lock order (task, then
operation). `operation_reconcile` starts from an operation, so it takes both locks itself.

This app does not import `agents.services` (an import-linter contract checks it): what it
needs of the task row is `agents.taskrow`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents.errors import BadInput, Conflict, NotFound
from agents.guard import types as g
from agents.models import Agent, Event, Task, ToolCall
from agents.taskrow import apply_state, lock_task, release_execution, to_state
from ledger.models import Operation, Reconciliation
from ledger.selectors import UNRESOLVED_STATES, is_unresolved, lease_over, waits_for_verdict

VERDICTS = (g.OP_COMMITTED, g.NOT_COMMITTED, g.UNKNOWN)


def operation_lock(namespace: str, operation_key: str) -> Operation | None:
    """The key's row, locked for the rest of the transaction (None when the key is new).
    Taken after the task row lock."""
    return (
        Operation.objects.select_for_update()
        .filter(namespace=namespace, operation_key=operation_key)
        .first()
    )


def operation_view(operation: Operation, now: datetime) -> g.OperationView:
    """The guard core's view of a locked row."""
    return g.OperationView(
        state=operation.state,
        fingerprint=operation.fingerprint,
        lease_live=operation.state == g.IN_FLIGHT and not lease_over(operation, now),
        result=operation.result,
    )


def operation_claim(
    operation: Operation | None,
    *,
    agent: Agent,
    task: Task,
    request: g.ToolRequest,
    fingerprint: str,
    lease: datetime,
    now: datetime,
) -> Operation:
    """Mark the key IN_FLIGHT for a call of `task` (insert on first use, else update the
    locked row). Two transactions inserting one new key at once: the unique constraint lets one
    win, the other gets an IntegrityError (the runner decides again)."""
    assert request.operation_key is not None  # the guard claims only a write with a key
    if operation is None:
        return Operation.objects.create(
            namespace=agent.namespace,
            operation_key=request.operation_key,
            tool=request.tool,
            fingerprint=fingerprint,
            args=request.args,
            state=g.IN_FLIGHT,
            task=task,
            lease_expires_at=lease,
            claimed_at=now,
        )
    operation.state = g.IN_FLIGHT
    operation.task = task
    operation.lease_expires_at = lease
    operation.claimed_at = now
    operation.attempts += 1
    operation.reconcile_checks = 0  # a new claim is a new episode for the reconciler
    operation.save()
    return operation


def operation_claimed_by(operation: Operation, call: ToolCall) -> None:
    """Point the claim at its call, once the call row exists: only its result settles it."""
    Operation.objects.filter(pk=operation.pk).update(tool_call=call)


def lease_expire(operation: Operation, *, task: Task, now: datetime, actor: str) -> bool:
    """An IN_FLIGHT claim whose lease ran out becomes UNKNOWN: nobody knows whether the write
    happened. Writes the one `lease_expired` event. True when the row changed now.

    `operation` is locked (after `task`, the task whose lock the caller holds: the claiming
    task for the lease sweep, the asking task for a tool request that ran into the claim).
    Whether the claiming execution leaves its task's pending set is the caller's: only that
    task's lock allows it (`agents.taskrow.release_execution`).
    """
    if operation.state != g.IN_FLIGHT or not lease_over(operation, now):
        return False
    lease = operation.lease_expires_at
    operation.state = g.UNKNOWN
    operation.reconcile_checks = 0  # a new UNKNOWN episode for the reconciler
    operation.save(update_fields=["state", "reconcile_checks", "updated_at"])
    Event.objects.create(
        task=task, agent_id=task.agent_id, operation=operation, kind="lease_expired",
        phase=task.phase, actor=actor, code="GUARD_LEDGER",
        detail={"operation_key": operation.operation_key, "tool": operation.tool,
                "lease_expires_at": lease and lease.isoformat()},
    )  # fmt: skip
    return True


def operation_settle(task: Task, call: ToolCall, outcome: g.Outcome, now: datetime) -> None:
    """A write's result settles its claim (locks the operation row, after the task's).

    Only the claiming call settles, and only an open claim (IN_FLIGHT or UNKNOWN); a late
    result is kept as an event, unless it is the claimer's and proves the commit (a reconciled
    row is then corrected to COMMITTED).

    The usual case is one conditional UPDATE: it locks the row and checks the rule on the row
    as it is once the lock is granted. When it changes nothing, the row is locked and read,
    and the rule decides again (a late result, or a row that changed in between).
    """
    # The caller settles only a write with a claim, on an outcome that names its state.
    assert call.operation_id is not None and outcome.operation_state is not None
    proves_commit = outcome.operation_state == g.OP_COMMITTED
    changes: dict[str, Any] = {
        "state": outcome.operation_state, "lease_expires_at": None, "updated_at": now
    }  # fmt: skip
    if proves_commit:
        changes.update(result=outcome.operation_result, committed_at=now)
    ours_and_open = Operation.objects.filter(pk=call.operation_id, tool_call_id=call.pk)
    if not proves_commit:
        ours_and_open = ours_and_open.filter(state__in=UNRESOLVED_STATES)
    if ours_and_open.update(**changes):
        return
    operation = Operation.objects.select_for_update().get(pk=call.operation_id)
    ours = operation.tool_call_id == call.pk
    if (not ours or not is_unresolved(operation)) and not (ours and proves_commit):
        Event.objects.create(
            task=task, agent_id=task.agent_id, operation=operation, kind="late_result",
            phase=task.phase, actor="system:guard",
            detail={"operation_key": operation.operation_key,
                    "ledger_state": operation.state, "reported": outcome.operation_state},
        )  # fmt: skip
        return
    operation.state = outcome.operation_state
    operation.lease_expires_at = None
    if proves_commit:
        operation.result = outcome.operation_result
        operation.committed_at = now
    operation.save()


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

    Locks the claiming task's row, then the operation row (the lock order, `agents.taskrow`).
    COMMITTED stores the result (later requests get REUSE); NOT_COMMITTED lets the key
    execute again; UNKNOWN records the note and changes nothing.
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
            # The task first, then the operation: the lock order (agents.taskrow).
            task_id = Operation.objects.values_list("task_id", flat=True).get(pk=operation_id)
            task = lock_task(task_id)
            operation = Operation.objects.select_for_update().get(pk=operation_id)
        except (Operation.DoesNotExist, ValueError):
            raise NotFound("No such operation.", code="OPERATION_NOT_FOUND") from None
        if not waits_for_verdict(operation, now):
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
