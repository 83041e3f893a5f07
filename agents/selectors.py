"""Reads: the JSON shapes of tasks, traces and operations, and filtered lists."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet

from agents.guard import core
from agents.models import Agent, Event, ModelCall, Task, ToolCall
from agents.services.snapshot import to_state
from ledger.models import Operation


def task_json(task: Task) -> dict:
    state = to_state(task)
    return {
        "id": str(task.pk),
        "agent": task.agent.name,
        "goal": task.goal,
        "external_ref": task.external_ref,
        "trigger_key": task.trigger_key,
        "profile": task.profile.name if task.profile_id else None,
        "state": task.state,
        "reason": task.reason or None,
        "code": task.code,
        "phase": task.phase,
        "limits": task.limits,
        "usage": core.usage(state),
        "remaining": core.remaining(state),
        "revision": task.revision,
        "stagnant": task.stagnant,
        "deadline_at": task.deadline_at.isoformat(),
        "created_at": task.created_at.isoformat(),
        "updated_at": task.updated_at.isoformat(),
        "report": task.report,
    }


def tasks_for(*, agent: Agent | None, state: str = "", agent_name: str = "") -> QuerySet[Task]:
    query = Task.objects.select_related("agent", "profile").order_by("-created_at")
    if agent is not None:
        query = query.filter(agent=agent)
    if state:
        query = query.filter(state=state)
    if agent_name:
        query = query.filter(agent__name=agent_name)
    return query


def model_call_json(call: ModelCall) -> dict:
    return {
        "type": "model_call", "id": call.pk, "seq": call.seq, "phase": call.phase,
        "round": call.round, "model": call.model, "decision": call.decision,
        "reason": call.reason or None, "reserved_cost": str(call.reserved_cost),
        "prompt_tokens": call.prompt_tokens, "completion_tokens": call.completion_tokens,
        "cost": str(call.cost) if call.cost is not None else None,
        "tool_calls": call.tool_calls, "created_at": call.created_at.isoformat(),
        "settled_at": call.settled_at.isoformat() if call.settled_at else None,
    }  # fmt: skip


def tool_call_json(call: ToolCall) -> dict:
    return {
        "type": "tool_call", "id": call.pk, "seq": call.seq, "phase": call.phase,
        "tool": call.tool, "args": call.args, "effect": call.effect,
        "operation_key": call.operation_key or None, "job_id": call.job_id or None,
        "call_id": call.call_id or None, "model_call": call.model_call_id,
        "fingerprint": call.fingerprint, "decision": call.decision,
        "reason": call.reason or None, "result_kind": call.result_kind or None,
        "result_decision": call.result_decision or None,
        "result_reason": call.result_reason or None,
        "revision_after": call.revision_after, "duration_ms": call.duration_ms,
        "created_at": call.created_at.isoformat(),
        "reported_at": call.reported_at.isoformat() if call.reported_at else None,
    }  # fmt: skip


def event_json(event: Event) -> dict:
    return {
        "type": "event", "id": event.pk, "kind": event.kind, "phase": event.phase,
        "actor": event.actor, "reason": event.reason, "code": event.code or None,
        "detail": event.detail, "created_at": event.created_at.isoformat(),
    }  # fmt: skip


@dataclass(frozen=True)
class TracePage:
    calls: list[dict]
    events: list[dict]
    next_cursor: str | None  # "<last seq>.<last event id>", None on the last page


def trace_page(task: Task, *, after_seq: int, after_event: int, limit: int) -> TracePage:
    """Up to `limit` calls after `after_seq` (model and tool calls share `seq`) and up to
    `limit` events after `after_event`; a next cursor while either list has more."""
    model_calls = task.model_call_rows.filter(seq__gt=after_seq).order_by("seq")[: limit + 1]
    tool_calls = task.tool_call_rows.filter(seq__gt=after_seq).order_by("seq")[: limit + 1]
    calls = [model_call_json(c) for c in model_calls] + [tool_call_json(c) for c in tool_calls]
    calls.sort(key=lambda row: row["seq"])
    event_rows = task.events.filter(pk__gt=after_event).order_by("pk")[: limit + 1]
    events = [event_json(e) for e in event_rows]
    more = len(calls) > limit or len(events) > limit
    calls, events = calls[:limit], events[:limit]
    if not more:
        return TracePage(calls, events, None)
    last_seq = calls[-1]["seq"] if calls else after_seq
    last_event = events[-1]["id"] if events else after_event
    return TracePage(calls, events, f"{last_seq}.{last_event}")


def audit_events(
    *, kind: str = "", actor: str = "", agent: str = "", task: str = "", everyone: bool = False
) -> QuerySet[Event]:
    """The audit log, newest first: people's actions, or with `everyone` also the agents' and
    the system's. The console's audit page and the API's `GET audit` both read it here."""
    query = Event.objects.select_related("task", "agent", "operation", "actor_user").order_by(
        "-created_at", "-id"
    )
    if not everyone:
        query = query.filter(Q(actor_user__isnull=False) | Q(actor__startswith="user:"))
    if kind:
        query = query.filter(kind=kind)
    if actor:
        query = query.filter(Q(actor=actor) | Q(actor=f"user:{actor}") | Q(actor=f"agent:{actor}"))
    if agent:
        query = query.filter(Q(agent__name=agent) | Q(task__agent__name=agent))
    if task:
        query = query.filter(task_id=task)
    return query


def audit_event_json(event: Event) -> dict:
    return {
        **event_json(event),
        "task": str(event.task_id) if event.task_id else None,
        "agent": event.agent.name if event.agent_id else None,
        "operation": event.operation_id,
    }


def operation_json(operation: Operation, *, with_history: bool = False) -> dict:
    body = {
        "id": operation.pk,
        "namespace": operation.namespace,
        "key": operation.operation_key,
        "tool": operation.tool,
        "args": operation.args,
        "fingerprint": operation.fingerprint,
        "state": operation.state,
        "task": str(operation.task_id),
        "result": operation.result,
        "claimed_at": operation.claimed_at.isoformat(),
        "lease_expires_at": operation.lease_expires_at.isoformat()
        if operation.lease_expires_at
        else None,
        "committed_at": operation.committed_at.isoformat() if operation.committed_at else None,
    }
    if with_history:
        body["reconciliations"] = [
            {
                "verdict": r.verdict,
                "previous_state": r.previous_state,
                "note": r.note,
                "result": r.result,
                "actor": r.actor,
                "automatic": r.automatic,
                "created_at": r.created_at.isoformat(),
            }  # fmt: skip
            for r in operation.reconciliations.all()
        ]
    return body
