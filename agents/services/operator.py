"""What operators and admins do to tasks and agents: stop, resume, limits, pause.

Console views, API views and Celery jobs call these; each writes its audit event in the same
transaction as the change.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents import roles
from agents.errors import BadInput, Conflict, Forbidden, NotFound
from agents.guard import core, terms
from agents.models import Agent, Event, EventKind, Phase, Task
from agents.redaction import redact
from agents.services import hooks, stops
from agents.taskrow import apply_state, lock_task, to_state
from agents.text import blank
from ledger.selectors import unresolved_operations


def actor_name(user) -> str:
    return f"user:{user.get_username()}" if user is not None else "system"


def task_stop(
    *,
    task_id: uuid.UUID | str,
    reason: str = "",
    request_id: str = "",
    user=None,
    agent: Agent | None = None,
    actor: str | None = None,
) -> tuple[Task, bool]:
    """Stop a task: STOPPED/operator_stop (a user), or agent_stop (the task's own agent). The
    task, and whether this request stopped it.

    An operator's stop needs a reason (400 REASON_REQUIRED, nothing changed); the agent's
    may omit it. Locks the task row, so a stop and a racing tool request are serialized:
    once the stop has committed, no request is answered EXECUTE. Idempotent: stopping a
    terminal task, or repeating a request_id, changes nothing and answers the task as it is
    (False).
    """
    now = timezone.now()
    guard_reason = "agent_stop" if agent is not None else "operator_stop"
    who = actor or (f"agent:{agent.name}" if agent is not None else actor_name(user))
    with transaction.atomic():
        task = lock_task(task_id, agent=agent)  # no such task: 404 before a bad body's 400
        if agent is None and blank(reason):
            # A person's stop says why (the agent's own may not): docs/DESIGN.md section 6.
            raise BadInput(
                "A reason is required to stop a task.",
                code="REASON_REQUIRED",
                fields={"reason": "required"},
            )
        if (
            request_id
            and task.events.filter(
                kind=EventKind.STOP_REQUESTED, detail__request_id=request_id
            ).exists()
        ):
            return task, False
        state = to_state(task)
        outcome = core.stop(state, guard_reason, now)
        Event.objects.create(
            task=task, agent_id=task.agent_id, kind=EventKind.STOP_REQUESTED, phase=task.phase,
            actor=who, actor_user=user, reason=reason,
            detail={"request_id": request_id, "applied": outcome.stopped_now},
        )  # fmt: skip
        if outcome.stopped_now:
            stops.record_stop(task, state, now, actor=who, actor_user=user, note=reason)
    hooks.decision_logged(task, "stop", outcome)
    return task, outcome.stopped_now


LOOP_LABELS = ("real_loop", "false_stop")


def task_label_stop(*, task_id: uuid.UUID | str, label: str, user) -> Task:
    """An operator's verdict on a stopped task ("real_loop" / "false_stop"; "" clears it), for
    tuning the similarity threshold with `loop_eval --from-db`. Locks the task row.

    Keeps: only a breaker trip is labelled (`terms.is_trip`: a completion or a person's stop
    says nothing about the loop detector; clearing a label is always allowed), and every
    label is audited in the same transaction.
    """
    if label and label not in LOOP_LABELS:
        # Console only (no API endpoint labels a stop), so no error code of its own.
        raise BadInput("Label a stop as real_loop or false_stop.")
    with transaction.atomic():
        task = lock_task(task_id)
        if not task.terminal:
            raise Conflict("Only a stopped task can be labelled.", code="TASK_RUNNING")
        if label and not terms.is_trip(task.reason):
            # Console only (no API endpoint labels a stop), so no error code of its own.
            raise Conflict("Only a breaker trip can be labelled: the guard did not stop this task.")
        Event.objects.create(
            task=task, agent_id=task.agent_id, kind=EventKind.STOP_LABELLED, phase=task.phase,
            actor=actor_name(user), actor_user=user, reason=task.reason,
            detail={"label": label, "before": task.loop_label},
        )  # fmt: skip
        task.loop_label = label
        task.save(update_fields=["loop_label", "updated_at"])
    return task


BAD_GRANT = "BAD_GRANT"  # the guard core's code for a grant it refuses


def _parse_grant(grant: dict[str, Any] | None) -> dict[str, Any]:
    """The guard core's grant parser (`core.parse_grant`), its refusal as a 400 BAD_GRANT."""
    try:
        return core.parse_grant(grant)
    except terms.GuardError as exc:
        raise BadInput(exc.message, code=exc.code, fields=exc.fields) from None


# Who may grant beyond the bound: the permission that lets a user change a task's limits at
# will (the admins group) would let them raise any limit anyway.
UNBOUNDED_GRANT_PERM = roles.CHANGE_TASK_LIMITS


def may_exceed_grant_bound(user) -> bool:
    return user is not None and user.has_perm(UNBOUNDED_GRANT_PERM)


def original_limits(task: Task) -> terms.Limits:
    """The limits the task was created with (tasks from before they were kept: today's)."""
    return terms.Limits.from_dict(task.initial_limits or task.limits)


def task_resume(
    *, task_id: uuid.UUID | str, user, reason: str, grant: dict[str, Any] | None = None
) -> Task:
    """Authorize a new phase of a stopped task. Locks the task row.

    Refused while an operation the task touched is UNKNOWN or IN_FLIGHT (reconcile first),
    while the task is RUNNING or COMPLETED, or when the grant leaves its deadline past
    (409 DEADLINE_PASSED with `fields.seconds_needed`, the core's `seconds_needed`). Usage
    and the detection window stay; the grant raises limits; `stagnant` starts again from 0.
    A user who may not change limits (a non-admin operator) may grant per resume, per budget,
    at most the task's original limit (`core.grant_bound`); above it: 403 GRANT_ABOVE_BOUND,
    nothing changed.
    """
    if blank(reason):
        raise BadInput(
            "A reason is required to resume.", code="REASON_REQUIRED", fields={"reason": "required"}
        )
    parsed = _parse_grant(grant)
    now = timezone.now()
    with transaction.atomic():
        task = lock_task(task_id)
        # Only operators resume, so the refusal names the keys as operators read them.
        open_ops = redact(list(unresolved_operations(task).values_list("operation_key", flat=True)))
        if open_ops:
            raise Conflict(
                "Reconcile these operations before resuming: " + ", ".join(open_ops),
                code="OPERATIONS_UNRESOLVED",
                fields={"operations": open_ops},
            )
        if not may_exceed_grant_bound(user):
            excess = core.grant_excess(parsed, original_limits(task))
            if excess:
                raise Forbidden(
                    "An operator may grant at most the task's original limit per budget in "
                    "one resume; ask an admin for more.",
                    code="GRANT_ABOVE_BOUND",
                    fields={f"grant.{k}": v for k, v in excess.items()},
                )
        state = to_state(task)
        try:
            core.resume(state, parsed, now)
        except terms.GuardError as exc:
            # A grant that would raise a limit past its largest value is bad input (400
            # BAD_GRANT, as `_parse_grant` answers); the other refusals are the task's state.
            refusal = BadInput if exc.code == BAD_GRANT else Conflict
            raise refusal(exc.message, code=exc.code, fields=exc.fields) from None
        apply_state(task, state)
        task.ended_at = None
        task.save()
        Phase.objects.create(
            task=task, number=task.phase, started_by=user, reason=reason,
            grant={k: str(v) for k, v in parsed.items()},
        )  # fmt: skip
        Event.objects.create(
            task=task, agent_id=task.agent_id, kind=EventKind.TASK_RESUMED, phase=task.phase,
            actor=actor_name(user), actor_user=user, reason=reason,
            detail={"grant": {k: str(v) for k, v in parsed.items()}},
        )  # fmt: skip
    return task


def task_set_limits(
    *, task_id: uuid.UUID | str, user, changes: dict[str, Any], reason: str = ""
) -> Task:
    """An admin changes a task's own limits. Locks the task row; usage is untouched."""
    if not isinstance(changes, dict) or not changes:
        raise BadInput(
            "Give the limits to change.",
            code="BAD_LIMITS",
            fields={"limits": "object with at least one field"},
        )
    try:
        clean = core.validate_limits(changes, partial=True)
    except terms.LimitError as exc:
        raise BadInput("The limits are not valid.", code="BAD_LIMITS", fields=exc.fields) from None
    with transaction.atomic():
        task = lock_task(task_id)
        before = dict(task.limits)
        merged = {**before, **terms.Limits.from_dict({**before, **clean}).to_dict()}
        if "deadline_seconds" in clean:
            delta = int(merged["deadline_seconds"]) - int(before["deadline_seconds"])
            task.deadline_at = task.deadline_at + timedelta(seconds=delta)
        task.limits = merged
        task.save()
        Event.objects.create(
            task=task, agent_id=task.agent_id, kind=EventKind.LIMITS_CHANGED, phase=task.phase,
            actor=actor_name(user), actor_user=user, reason=reason,
            detail={"before": {k: before.get(k) for k in clean},
                    "after": {k: merged[k] for k in clean}},
        )  # fmt: skip
    return task


def agent_set_paused(*, name: str, paused: bool, user, reason: str) -> tuple[Agent, bool]:
    """Pause or unpause an agent: the kill switch for all its tasks. Locks the agent row.

    A paused agent's next gate or tool request stops its task with agent_paused. Returns the
    agent and whether this call changed it: a pause of a paused agent (or an unpause of one
    not paused: two people, or a stale tab) changes nothing, keeps the first reason and writes
    no audit row.
    """
    if blank(reason):
        raise BadInput(
            "A reason is required.", code="REASON_REQUIRED", fields={"reason": "required"}
        )
    with transaction.atomic():
        try:
            agent = Agent.objects.select_for_update().get(name=name)
        except Agent.DoesNotExist:
            raise NotFound("No such agent.", code="AGENT_NOT_FOUND") from None
        if agent.paused == paused:
            return agent, False
        agent.paused = paused
        agent.paused_reason = reason if paused else ""
        agent.save(update_fields=["paused", "paused_reason"])
        Event.objects.create(
            agent=agent, kind=EventKind.AGENT_PAUSED if paused else EventKind.AGENT_UNPAUSED,
            actor=actor_name(user), actor_user=user, reason=reason,
        )  # fmt: skip
    return agent, True
