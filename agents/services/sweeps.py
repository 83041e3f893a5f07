"""Sweeps: what happens to work an agent abandoned. Beat runs them; so may anyone, any time.

Each sweep selects candidate ids without locks, then handles one row per transaction: take the
task row lock first (the lock order, `agents.taskrow`), re-check the condition
under the lock and claim the row with a conditional update. A row another transaction already
handled fails the re-check and is skipped, so running a sweep twice equals running it once and
two sweeps racing each other change each row once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agents import selectors
from agents.db.day_money import move_day_money
from agents.errors import NotFound
from agents.guard import core, terms
from agents.models import UNSETTLED, Event, EventKind, ModelCall, Task
from agents.services import hooks, stops
from agents.taskrow import apply_state, lock_task, release_execution, save_task, to_state
from ledger import services as ledger
from ledger.models import Operation

BATCH = 500  # rows per sweep run; the next run takes the rest


@dataclass
class SweepResult:
    """What one sweep run changed: ids of the rows it claimed and of the tasks it stopped."""

    claimed: list = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {"claimed": len(self.claimed), "stopped": len(self.stopped)}


def sweep_leases(*, now: datetime | None = None, batch: int = BATCH) -> SweepResult:
    """IN_FLIGHT operations past their lease become UNKNOWN; their RUNNING task NEEDS_HUMAN.

    Per operation: locks the claiming task, then claims the operation with a conditional update
    (still IN_FLIGHT, still this task's claim, lease still over). A result that arrived in the
    meantime settled the row and the update matches nothing. A task already stopped keeps its
    own stop; the operation still becomes UNKNOWN, because nobody knows whether it committed.

    Another task's request for the same key may have found the lease over first and marked the
    row UNKNOWN itself (runner.tool_call_request); the claiming task, still RUNNING with its
    call unreported, needs a human just the same and is stopped here.
    """
    now = now or timezone.now()
    result = SweepResult()
    over = Q(lease_expires_at__lte=now)
    orphaned = Q(
        state=terms.UNKNOWN,
        task__state=terms.RUNNING,
        tool_call__isnull=False,
        tool_call__reported_at__isnull=True,
    )
    candidates = list(
        Operation.objects.filter(over & (Q(state=terms.IN_FLIGHT) | orphaned))
        .order_by("lease_expires_at")
        .values_list("pk", "task_id")[:batch]
    )
    for operation_id, task_id in candidates:
        with transaction.atomic():
            task = _lock_or_none(task_id)
            if task is None:
                continue
            operation = (
                Operation.objects.select_for_update().filter(pk=operation_id, task_id=task.pk)
            ).first()  # still this task's claim (after the task: the lock order)
            if operation is None:
                continue
            claimed = ledger.lease_expire(operation, task=task, now=now, actor="system:lease_sweep")
            if not claimed and not (
                task.state == terms.RUNNING
                and Operation.objects.filter(pk=operation_id).filter(over & orphaned).exists()
            ):  # settled, reclaimed or already handled since it was selected
                continue
            state = to_state(task)
            # The expired claim's execution is no longer in flight (docs/DESIGN.md section 6).
            released = release_execution(task, state, operation.tool_call, now)
            outcome = core.lease_expired(state, now)
            if outcome.stopped_now:
                stops.record_stop(task, state, now, actor="system:lease_sweep")
                result.stopped.append(str(task.pk))
            elif released:
                apply_state(task, state)
                save_task(task)
        if claimed:
            result.claimed.append(operation_id)
        hooks.decision_logged(task, "lease_sweep", outcome, operation=operation)
    return result


def sweep_deadlines(*, now: datetime | None = None, batch: int = BATCH) -> SweepResult:
    """RUNNING tasks past their deadline become PARTIAL/deadline. Locks each task row.

    The guard core re-checks under the lock: a task that stopped, or whose deadline an admin
    moved, in the meantime is left alone.
    """
    now = now or timezone.now()
    result = SweepResult()
    candidates = list(
        Task.objects.filter(state=terms.RUNNING, deadline_at__lte=now)
        .order_by("deadline_at")
        .values_list("pk", flat=True)[:batch]
    )
    for task_id in candidates:
        with transaction.atomic():
            task = _lock_or_none(task_id)
            if task is None:
                continue
            state = to_state(task)
            outcome = core.expire_deadline(state, now)
            if not outcome.stopped_now:
                continue
            stops.record_stop(task, state, now, actor="system:deadline_sweep")
        result.claimed.append(task_id)
        result.stopped.append(str(task_id))
        hooks.decision_logged(task, "deadline_sweep", outcome)
    return result


def sweep_reservations(
    *, now: datetime | None = None, timeout_seconds: int | None = None, batch: int = BATCH
) -> SweepResult:
    """Model-call reservations never settled are charged as reserved after a timeout.

    Per call: locks the task, then claims the call (`expired` false to true, still unsettled)
    with a conditional update; only the claimer moves the money and the tokens, on the task
    (reserved to spent/used) and the money on the agent's day of the call. A usage report
    arriving later is charged only what exceeds the reservation (see `runner.model_call_usage`).
    """
    now = now or timezone.now()
    timeout = timeout_seconds or settings.RESERVATION_TIMEOUT_SECONDS
    cutoff = now - timedelta(seconds=timeout)
    result = SweepResult()
    for call_id, task_id in selectors.unsettled_reservations(cutoff, batch):
        with transaction.atomic():
            task = _lock_or_none(task_id)
            if task is None:
                continue
            # Claimed only while still unsettled (the candidates' own condition, re-checked
            # under the task's lock): a usage report or another sweep got there first otherwise.
            claimed = ModelCall.objects.filter(UNSETTLED, pk=call_id).update(expired=True)
            if claimed != 1:
                continue
            call = ModelCall.objects.get(pk=call_id)
            amount = call.reserved_cost
            released = min(amount, task.cost_reserved)
            task.cost_reserved -= released
            task.cost_spent += amount
            # Tokens expire like money: charged as reserved.
            task.tokens_reserved -= min(call.reserved_tokens, task.tokens_reserved)
            task.tokens_used += call.reserved_tokens
            task.save(
                update_fields=[
                    "cost_reserved", "cost_spent", "tokens_reserved", "tokens_used", "updated_at"
                ]
            )  # fmt: skip
            move_day_money(task.agent_id, call.created_at.date(), reserved=-amount, spent=amount)
            Event.objects.create(
                task=task, agent_id=task.agent_id, kind=EventKind.RESERVATION_EXPIRED,
                phase=call.phase,
                actor="system:reservation_sweep",
                detail={"model_call": call.pk, "seq": call.seq, "charged": str(amount),
                        "tokens": call.reserved_tokens, "timeout_seconds": timeout},
            )  # fmt: skip
        result.claimed.append(call_id)
    return result


def _lock_or_none(task_id: uuid.UUID | str) -> Task | None:
    try:
        return lock_task(task_id)
    except NotFound:  # deleted since it was selected
        return None
