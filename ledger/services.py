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
from django.db.models import F, OuterRef, Subquery
from django.utils import timezone

from agents.errors import BadInput, Conflict, NotFound
from agents.guard import terms
from agents.models import Agent, Event, EventKind, Task, ToolCall
from agents.redaction import redact
from agents.taskrow import LockProbe, apply_state, lock_task, release_execution, to_state
from agents.text import blank
from ledger.models import Operation, Reconciliation
from ledger.selectors import UNRESOLVED_STATES, is_unresolved, lease_over, waits_for_verdict

VERDICTS = (terms.OP_COMMITTED, terms.NOT_COMMITTED, terms.UNKNOWN)


def operation_lock(namespace: str, operation_key: str) -> Operation | None:
    """The key's row, locked for the rest of the transaction (None when the key is new).
    Taken after the task row lock."""
    return (
        Operation.objects.select_for_update()
        .filter(namespace=namespace, operation_key=operation_key)
        .first()
    )


def operation_probe(operation_key: str) -> Subquery:
    """The key's row id in the namespace of the task's agent, read (not locked) by the task
    lock's statement: an annotation for `agents.taskrow.lock_task`, so a tool request knows
    which claim to try first. The namespace comes from the agent row the lock joins: a
    decision whose token the lock checks (`agents.taskrow.AgentClaim`) knows no agent before."""
    return Subquery(
        Operation.objects.filter(
            namespace=OuterRef("agent__namespace"), operation_key=operation_key
        ).values("pk")[:1]
    )


# The same read for `lock_task(probe=...)`: its shape is fixed, so the lock with it is
# compiled once per connection (value: operation_key).
OPERATION_PROBE = LockProbe(
    build=lambda operation_key: {"operation_probe": operation_probe(operation_key)},
    slots={"operation_key": (Operation._meta.get_field("operation_key"), "prepared:marker:key")},
)


def operation_assumed(probe: int | None, fingerprint: str) -> terms.OperationView | None:
    """The view a claim assumes before any ledger lock: no row (the probe found none), or a
    row NOT_COMMITTED under this very fingerprint, the one state a row is claimed again from.
    `operation_claim_assumed` then makes the assumption true or says it was not."""
    if probe is None:
        return None
    return terms.OperationView(
        state=terms.NOT_COMMITTED, fingerprint=fingerprint, lease_live=False, result=None
    )


def operation_claim_assumed(
    probe: int | None,
    *,
    agent: Agent,
    task: Task,
    request: terms.ToolRequest,
    fingerprint: str,
    lease: datetime,
    now: datetime,
    claim_seq: int,
) -> int | None:
    """Claim the key for the call `claim_seq` of `task` as `operation_assumed` assumed, in one
    statement; the row's id, or None when the row is not as assumed (the caller then locks it
    and decides again).

    A new key is inserted: a key inserted meanwhile by another transaction fails the unique
    constraint (IntegrityError: the runner decides again, as for `operation_claim`). A known
    key is claimed by an UPDATE that matches only a NOT_COMMITTED row with this fingerprint:
    the UPDATE locks the row and checks the condition on the row as it is once locked, so it
    claims exactly when a decision under the row lock would have.
    """
    if probe is None:
        return operation_claim(
            None, agent=agent, task=task, request=request, fingerprint=fingerprint,
            lease=lease, now=now, claim_seq=claim_seq,
        ).pk  # fmt: skip
    claimed = Operation.objects.filter(
        pk=probe, state=terms.NOT_COMMITTED, fingerprint=fingerprint
    ).update(
        state=terms.IN_FLIGHT, task=task, claim_seq=claim_seq, lease_expires_at=lease,
        claimed_at=now, attempts=F("attempts") + 1, reconcile_checks=0, updated_at=now,
    )  # fmt: skip
    return probe if claimed else None


def operation_view(operation: Operation, now: datetime) -> terms.OperationView:
    """The guard core's view of a locked row."""
    return terms.OperationView(
        state=operation.state,
        fingerprint=operation.fingerprint,
        lease_live=operation.state == terms.IN_FLIGHT and not lease_over(operation, now),
        result=operation.result,
    )


def operation_claim(
    operation: Operation | None,
    *,
    agent: Agent,
    task: Task,
    request: terms.ToolRequest,
    fingerprint: str,
    lease: datetime,
    now: datetime,
    claim_seq: int,
) -> Operation:
    """Mark the key IN_FLIGHT for the call `claim_seq` of `task` (insert on first use, else
    update the locked row). The call row is inserted after this: the claim names it by its
    place in the task's trace. Two transactions inserting one new key at once: the unique
    constraint lets one win, the other gets an IntegrityError (the runner decides again)."""
    assert request.operation_key is not None  # the guard claims only a write with a key
    if operation is None:
        return Operation.objects.create(
            namespace=agent.namespace,
            operation_key=request.operation_key,
            tool=request.tool,
            fingerprint=fingerprint,
            args=request.args,
            state=terms.IN_FLIGHT,
            task=task,
            claim_seq=claim_seq,
            lease_expires_at=lease,
            claimed_at=now,
        )
    operation.state = terms.IN_FLIGHT
    operation.task = task
    operation.claim_seq = claim_seq
    operation.lease_expires_at = lease
    operation.claimed_at = now
    operation.attempts += 1
    operation.reconcile_checks = 0  # a new claim is a new episode for the reconciler
    operation.save()
    return operation


def claimed_by(operation: Operation, call: ToolCall) -> bool:
    """Whether `call` is the operation's claiming call (no statement)."""
    return (operation.task_id, operation.claim_seq) == (call.task_id, call.seq)


def claim_decided(call: ToolCall) -> bool:
    """Whether the write `call` claimed is decided without it: the row is no longer its open
    claim (a verdict settled it, or another call claimed the key since). Read under the lock
    of the call's task, which a reconcile of that claim takes first."""
    if call.operation_id is None:
        return False
    fields = ("state", "task_id", "claim_seq")
    operation = Operation.objects.filter(pk=call.operation_id).only(*fields).first()
    return operation is not None and not (claimed_by(operation, call) and is_unresolved(operation))


def lease_expire(operation: Operation, *, task: Task, now: datetime, actor: str) -> bool:
    """An IN_FLIGHT claim whose lease ran out becomes UNKNOWN: nobody knows whether the write
    happened. Writes the one `lease_expired` event. True when the row changed now.

    `operation` is locked (after `task`, the task whose lock the caller holds: the claiming
    task for the lease sweep, the asking task for a tool request that ran into the claim).
    Whether the claiming execution leaves its task's pending set is the caller's: only that
    task's lock allows it (`agents.taskrow.release_execution`).
    """
    if operation.state != terms.IN_FLIGHT or not lease_over(operation, now):
        return False
    lease = operation.lease_expires_at
    operation.state = terms.UNKNOWN
    operation.reconcile_checks = 0  # a new UNKNOWN episode for the reconciler
    operation.save(update_fields=["state", "reconcile_checks", "updated_at"])
    Event.objects.create(
        task=task, agent_id=task.agent_id, operation=operation, kind=EventKind.LEASE_EXPIRED,
        phase=task.phase, actor=actor, code="GUARD_LEDGER",
        detail={"operation_key": operation.operation_key, "tool": operation.tool,
                "lease_expires_at": lease and lease.isoformat()},
    )  # fmt: skip
    return True


def operation_settle(task: Task, call: ToolCall, outcome: terms.Outcome, now: datetime) -> None:
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
    proves_commit = outcome.operation_state == terms.OP_COMMITTED
    changes: dict[str, Any] = {
        "state": outcome.operation_state, "lease_expires_at": None, "updated_at": now
    }  # fmt: skip
    if proves_commit:
        changes.update(result=outcome.operation_result, committed_at=now)
    ours_and_open = Operation.objects.filter(
        pk=call.operation_id, task_id=call.task_id, claim_seq=call.seq
    )
    if not proves_commit:
        ours_and_open = ours_and_open.filter(state__in=UNRESOLVED_STATES)
    if ours_and_open.update(**changes):
        return
    operation = Operation.objects.select_for_update().get(pk=call.operation_id)
    ours = claimed_by(operation, call)
    if (not ours or not is_unresolved(operation)) and not (ours and proves_commit):
        Event.objects.create(
            task=task, agent_id=task.agent_id, operation=operation, kind=EventKind.LATE_RESULT,
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
    claim: int | None = None,
) -> Operation:
    """Record a verdict on an UNKNOWN operation (or an IN_FLIGHT one whose lease expired).

    Locks the claiming task's row, then the operation row (the lock order, `agents.taskrow`).
    COMMITTED stores the result (later requests get REUSE); NOT_COMMITTED lets the key
    execute again; UNKNOWN records the note and changes nothing. Only COMMITTED takes a
    `result` (else 400 RESULT_NOT_ALLOWED, nothing changed).

    `claim`, when given, is the claim the verdict speaks of (the operation's `attempts` when
    it was asked about, as a reconciler is): a row claimed again since then is another
    episode, which that verdict knows nothing of (409 OPERATION_CHANGED, nothing changed).
    """
    if verdict not in VERDICTS:
        raise BadInput(
            f"verdict must be one of {', '.join(VERDICTS)}.",
            code="BAD_VERDICT",
            fields={"verdict": "invalid"},
        )
    if blank(note):
        raise BadInput("A note is required.", code="NOTE_REQUIRED", fields={"note": "required"})
    if result is not None and verdict != terms.OP_COMMITTED:
        # Only a commit has a result: a NOT_COMMITTED or UNKNOWN verdict carrying one would
        # leave an audit row that contradicts itself.
        raise BadInput(
            "Only a COMMITTED verdict stores a result.",
            code="RESULT_NOT_ALLOWED",
            fields={"result": "Only a COMMITTED verdict stores a result."},
        )
    now = timezone.now()
    with transaction.atomic():
        try:
            # The task first, then the operation: the lock order (agents.taskrow).
            task_id = Operation.objects.values_list("task_id", flat=True).get(pk=operation_id)
            task = lock_task(task_id)
            operation = Operation.objects.select_for_update().get(pk=operation_id)
        except (Operation.DoesNotExist, ValueError):
            raise NotFound("No such operation.", code="OPERATION_NOT_FOUND") from None
        if claim is not None and operation.attempts != claim:
            raise Conflict(
                f"Operation {redact(operation.operation_key)} was claimed again since this verdict "
                "was asked for.",
                code="OPERATION_CHANGED",
            )
        if not waits_for_verdict(operation, now):
            raise Conflict(
                f"Operation {redact(operation.operation_key)} is {operation.state}; only UNKNOWN "
                "operations are reconciled.",
                code="OPERATION_NOT_UNKNOWN",
            )
        previous = operation.state
        if verdict == terms.OP_COMMITTED:
            operation.state = terms.OP_COMMITTED
            operation.result = result
            operation.committed_at = now
        elif verdict == terms.NOT_COMMITTED:
            operation.state = terms.NOT_COMMITTED
        else:
            operation.state = terms.UNKNOWN
        if verdict != terms.UNKNOWN:
            operation.lease_expires_at = None
        # A verdict of UNKNOWN keeps the lease it found over: the lease sweep's rule for an
        # UNKNOWN row whose claimer still runs with its call unreported (its task needs a
        # human) is asked of that lease, and a verdict that nobody knows changes nothing.
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
            kind=EventKind.OPERATION_RECONCILED, actor=actor, actor_user=user, reason=note,
            detail={"operation_key": operation.operation_key, "verdict": verdict,
                    "previous_state": previous, "automatic": automatic},
        )  # fmt: skip
    return operation
