"""Moving a task between its row and the guard core's `TaskState`."""

from __future__ import annotations

from datetime import datetime

from agents.guard import core
from agents.guard import types as g
from agents.models import Event, Phase, Task, ToolCall
from ledger.models import Operation

SNAPSHOT_FIELDS = (
    "model_calls", "tool_requests", "tool_executions", "retries", "polls", "tokens_used",
    "tokens_reserved", "cost_spent", "cost_reserved", "revision", "stagnant", "milestones",
    "phase", "deadline_at",
)  # fmt: skip


def to_state(task: Task, *, seen_hashes: list[str] | None = None) -> g.TaskState:
    """The core's view of the row. `seen_hashes` are the few seen data hashes a decision needs
    (they live in their own table; see `runner.tool_call_result`)."""
    return g.TaskState(
        state=task.state,
        reason=task.reason or None,
        limits=g.Limits.from_dict(task.limits),
        window=[g.WindowEntry.from_dict(e) for e in task.window],
        blocked=list(task.blocked),
        pending=list(task.pending),
        signatures=list(task.signatures),
        plans=list(task.plans),
        reflection=task.reflection,
        seen_hashes=list(seen_hashes or []),
        report=task.report,
        **{name: getattr(task, name) for name in SNAPSHOT_FIELDS},
    )


def apply_state(task: Task, state: g.TaskState) -> None:
    """Copy the core's result onto the row (the caller saves it)."""
    task.state = state.state
    task.reason = state.reason or ""
    task.limits = state.limits.to_dict()
    task.window = [e.to_dict() for e in state.window]
    task.blocked = state.blocked
    task.pending = state.pending
    task.signatures = state.signatures
    task.plans = state.plans
    task.reflection = state.reflection
    task.report = state.report
    for name in SNAPSHOT_FIELDS:
        setattr(task, name, getattr(state, name))


def release_execution(task: Task, state: g.TaskState, call: ToolCall | None, now: datetime) -> bool:
    """The claim of an EXECUTE'd `call` expired or was reconciled: it leaves the pending set.

    Once per call: the call row is marked released with a conditional update, so a sweep, a
    reconcile and a racing request releasing the same call remove one pending entry between
    them, and a late result (`ToolCallView.in_flight` false) removes none. Called under the
    lock of the call's `task`, whose `state` the caller writes back. True when released now.
    """
    if call is None or call.decision != g.EXECUTE or call.task_id != task.pk:
        return False
    claimed = ToolCall.objects.filter(
        pk=call.pk, task_id=task.pk, reported_at=None, released_at=None
    ).update(released_at=now)
    if claimed != 1:
        return False
    call.released_at = now
    core.release_pending(state, call.fingerprint)
    return True


def operations_touched(task: Task):
    """Ledger rows any call of this task claimed or ran into (also another task's claim)."""
    return Operation.objects.filter(
        id__in=task.tool_call_rows.exclude(operation=None).values("operation_id")
    )


def operations_of(task: Task) -> list[dict[str, str]]:
    return [
        {"key": key, "state": state}
        for key, state in operations_touched(task)
        .order_by("claimed_at", "id")
        .values_list("operation_key", "state")
    ]


def close_phase_and_report(
    task: Task, state: g.TaskState, now: datetime, *, actor: str, actor_user=None, note: str = ""
) -> None:
    """The task just became terminal: store the report once, close the phase, log the stop.

    Called inside the transaction that holds the task row lock.
    """
    report = core.build_report(state, now, operations_of(task))
    apply_state(task, state)
    task.ended_at = now
    Phase.objects.filter(task=task, number=task.phase).update(
        ended_at=now, end_state=task.state, end_reason=task.reason, report=report
    )
    Event.objects.create(
        task=task,
        agent_id=task.agent_id,
        kind="task_stopped" if task.state != g.COMPLETED else "task_completed",
        phase=task.phase,
        actor=actor,
        actor_user=actor_user,
        reason=note or task.reason,
        code=g.REASON_CODES.get(task.reason) or "",
        detail={"state": task.state, "reason": task.reason},
    )
    from agents.services import hooks

    hooks.task_stopped(task)
