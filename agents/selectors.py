"""Reads: the JSON shapes of tasks, traces and operations, and filtered lists."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Count, F, Q, QuerySet, Sum
from django.utils import timezone

from agents import loop_eval
from agents.guard import core, terms
from agents.models import (
    UNSETTLED,
    Agent,
    AgentDay,
    Event,
    EventKind,
    ModelCall,
    Phase,
    Task,
    TaskStateDelta,
    ToolCall,
    ToolPolicy,
)
from agents.redaction import DEFAULT, RedactionPolicy
from agents.taskrow import to_state
from ledger.models import Operation


def unsettled_reservations(cutoff: datetime, batch: int) -> list[tuple[int, uuid.UUID]]:
    """(id, task id) of up to `batch` model calls whose reservation nothing settled (`UNSETTLED`)
    made before `cutoff`, oldest first: the reservation sweep's candidates, read through the
    partial index that holds exactly those calls (`mc_unsettled`)."""
    return list(
        ModelCall.objects.filter(UNSETTLED, created_at__lt=cutoff)
        .order_by("created_at")
        .values_list("pk", "task_id")[:batch]
    )


class Redactor:
    """The redaction policy (agents.redaction) with each tool's extra fields from its tool
    policy, read once per tool per response. What operators read goes through it; agents
    reading their own data and REUSE get the stored values."""

    def __init__(self) -> None:
        self._policies: dict[str, RedactionPolicy] = {}

    def policy(self, tool: str = "") -> RedactionPolicy:
        if not tool:
            return DEFAULT
        if tool not in self._policies:
            fields = (
                ToolPolicy.objects.filter(tool=tool).values_list("redact_fields", flat=True).first()
            )
            if isinstance(fields, str):
                fields = [fields]
            valid = [f for f in fields or [] if isinstance(f, str)]
            self._policies[tool] = RedactionPolicy(valid) if valid else DEFAULT
        return self._policies[tool]

    def apply(self, value, tool: str = ""):
        return self.policy(tool).apply(value)

    def text(self, value: str | None) -> str | None:
        """A text an agent wrote (a goal, an operation key, a reason), masked."""
        return DEFAULT.mask_text(value) if value else value

    def tool_calls(self, calls):
        """A model call's requested tool calls, each masked by its own tool's policy; the name
        is the agent's text too, masked as the console's timeline masks it."""
        if not isinstance(calls, list):
            return self.apply(calls)
        return [self._tool_call(c) if isinstance(c, dict) else self.apply(c) for c in calls]

    def _tool_call(self, call: dict) -> dict:
        name = call.get("name")
        shown = {**call, "args": self.apply(call.get("args"), str(name or ""))}
        if isinstance(name, str):
            shown["name"] = self.text(name)
        return shown


class _Verbatim(Redactor):
    """For an agent's own reads: nothing masked."""

    def apply(self, value, tool: str = ""):
        return value

    def text(self, value: str | None) -> str | None:
        return value

    def tool_calls(self, calls):
        return calls


def redactor(*, operator: bool) -> Redactor:
    return Redactor() if operator else _Verbatim()


def task_json(task: Task, masks: Redactor | None = None) -> dict:
    masks = masks or _Verbatim()
    state = to_state(task)
    return {
        "id": str(task.pk),
        "agent": task.agent.name,
        "goal": masks.text(task.goal),
        "external_ref": masks.text(task.external_ref),
        "trigger_key": masks.text(task.trigger_key),
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
        "report": masks.apply(task.report),
    }


def agent_json(agent: Agent) -> dict:
    """An agent as operators read it: the pause reason (an operator's note, read by every
    operator after) masked by the redaction policy, as the console and the audit log show it."""
    return {
        "name": agent.name,
        "namespace": agent.namespace,
        "default_profile": agent.default_profile.name if agent.default_profile_id else None,
        "allowed_profiles": sorted(agent.allowed_profiles.values_list("name", flat=True)),
        "daily_cost_cap": str(agent.daily_cost_cap) if agent.daily_cost_cap is not None else None,
        "paused": agent.paused,
        "paused_reason": DEFAULT.mask_text(agent.paused_reason),
    }


def task_counts_by_state() -> dict[str, int]:
    """Tasks by state (states without a task are missing), for the console and the metrics.

    The sums of the state deltas the task table's triggers append (`TaskStateDelta`), folded
    into a row a state by the rollup job: as many rows as states plus the changes since, where
    a count of the tasks read all of them (94 ms at 200,000 tasks, even from the index alone)."""
    found = TaskStateDelta.objects.order_by().values_list("state").annotate(total=Sum("n"))
    return {state: total for state, total in found if total}


def spend_on(day: date) -> tuple[Decimal, Decimal]:
    """All agents' money on `day`: settled spend and open reservations (the day's rows found
    through the day index: the day rows of every agent and every day only grow)."""
    totals = AgentDay.objects.filter(day=day).aggregate(
        spent=Sum("spent"), reserved=Sum("reserved")
    )
    return totals["spent"] or Decimal(0), totals["reserved"] or Decimal(0)


def breaker_trips(*, start: datetime, end: datetime | None = None) -> QuerySet[Event]:
    """The stops in [start, end) that are breaker trips (`terms.TRIP_REASONS`): what the
    dashboard, the daily rollups, the metrics and the advisor count. One event per stop, so a
    task resumed and stopped again trips again.

    Read by the stop's reason (the event's `reason` column holds a person's note when one was
    given), not by its code: stops recorded while goal_unverified carried a code stay out."""
    query = Event.objects.filter(
        kind=EventKind.TASK_STOPPED,
        task__isnull=False,
        created_at__gte=start,
        detail__reason__in=sorted(terms.TRIP_REASONS),
    )
    if end is not None:
        query = query.filter(created_at__lt=end)
    return query.order_by()


def day_bounds(day: date) -> tuple[datetime, datetime]:
    """A UTC day as [start, end): agent days, the daily cap, rollups and trips count in UTC.
    The last day a date holds (9999-12-31, which a date box sends) ends at the last moment a
    datetime holds: no datetime holds the day after."""
    start = datetime.combine(day, time.min, tzinfo=UTC)
    if day == date.max:
        return start, datetime.max.replace(tzinfo=UTC)
    return start, start + timedelta(days=1)


def trace_pruned_between(start: datetime, end: datetime) -> bool:
    """Whether retention removed trace rows made in [start, end): a phase ran then and ended
    before its task's trace was pruned. The rollups of such a day cannot be rebuilt."""
    return Phase.objects.filter(
        task__trace_pruned_at__isnull=False,
        started_at__lt=end,
        ended_at__gte=start,
        ended_at__lt=F("task__trace_pruned_at"),
    ).exists()


def trips_on(day: date) -> dict[str, int]:
    """Breaker trips of one UTC day by code (codes without a trip are missing): the
    dashboard's "today" and the metrics' gauge."""
    start, end = day_bounds(day)
    return dict(breaker_trips(start=start, end=end).values_list("code").annotate(n=Count("id")))


def tasks_for(*, agent: Agent | None, state: str = "", agent_name: str = "") -> QuerySet[Task]:
    query = Task.objects.select_related("agent", "profile").order_by("-created_at")
    if agent is not None:
        query = query.filter(agent=agent)
    if state:
        query = query.filter(state=state)
    if agent_name:
        query = query.filter(agent__name=agent_name)
    return query


def model_call_json(call: ModelCall, masks: Redactor | None = None) -> dict:
    masks = masks or _Verbatim()
    return {
        "type": "model_call", "id": call.pk, "seq": call.seq, "phase": call.phase,
        "round": call.round, "model": masks.text(call.model), "decision": call.decision,
        "reason": call.reason or None, "reserved_cost": str(call.reserved_cost),
        "prompt_tokens": call.prompt_tokens, "completion_tokens": call.completion_tokens,
        "cost": str(call.cost) if call.cost is not None else None,
        "tool_calls": masks.tool_calls(call.tool_calls),
        "created_at": call.created_at.isoformat(),
        "settled_at": call.settled_at.isoformat() if call.settled_at else None,
    }  # fmt: skip


def tool_call_json(call: ToolCall, masks: Redactor | None = None) -> dict:
    masks = masks or _Verbatim()
    return {
        "type": "tool_call", "id": call.pk, "seq": call.seq, "phase": call.phase,
        "tool": call.tool, "args": masks.apply(call.args, call.tool), "effect": call.effect,
        "operation_key": masks.text(call.operation_key) or None,
        "job_id": masks.text(call.job_id) or None, "call_id": masks.text(call.call_id) or None,
        "model_call": call.model_call_id,
        "fingerprint": call.fingerprint, "decision": call.decision,
        "reason": call.reason or None, "result_kind": call.result_kind or None,
        "result_decision": call.result_decision or None,
        "result_reason": call.result_reason or None,
        "revision_after": call.revision_after, "duration_ms": call.duration_ms,
        "novel_keys": call.novel_keys,
        "created_at": call.created_at.isoformat(),
        "reported_at": call.reported_at.isoformat() if call.reported_at else None,
    }  # fmt: skip


def event_json(event: Event, masks: Redactor | None = None) -> dict:
    masks = masks or _Verbatim()
    return {
        "type": "event", "id": event.pk, "kind": event.kind, "phase": event.phase,
        "actor": event.actor, "reason": masks.text(event.reason), "code": event.code or None,
        "detail": masks.apply(event.detail), "created_at": event.created_at.isoformat(),
    }  # fmt: skip


@dataclass(frozen=True)
class TracePage:
    calls: list[dict]
    events: list[dict]
    next_cursor: str | None  # "<last seq>.<last event id>", None on the last page


def trace_page(
    task: Task, *, after_seq: int, after_event: int, limit: int, masks: Redactor | None = None
) -> TracePage:
    """Up to `limit` calls after `after_seq` (model and tool calls share `seq`) and up to
    `limit` events after `after_event`; a next cursor while either list has more."""
    model_calls = task.model_call_rows.filter(seq__gt=after_seq).order_by("seq")[: limit + 1]
    tool_calls = task.tool_call_rows.filter(seq__gt=after_seq).order_by("seq")[: limit + 1]
    calls = [model_call_json(c, masks) for c in model_calls] + [
        tool_call_json(c, masks) for c in tool_calls
    ]
    calls.sort(key=lambda row: row["seq"])
    event_rows = task.events.filter(pk__gt=after_event).order_by("pk")[: limit + 1]
    events = [event_json(e, masks) for e in event_rows]
    more = len(calls) > limit or len(events) > limit
    calls, events = calls[:limit], events[:limit]
    if not more:
        return TracePage(calls, events, None)
    last_seq = calls[-1]["seq"] if calls else after_seq
    last_event = events[-1]["id"] if events else after_event
    return TracePage(calls, events, f"{last_seq}.{last_event}")


# The audit log: what people did (an operator's or admin's action), as against what the agents
# and the system did. Retention keeps these rows (agents.services.retention).
PEOPLES_ACTIONS = Q(actor_user__isnull=False) | Q(actor__startswith="user:")


def audit_events(
    *, kind: str = "", actor: str = "", agent: str = "", task: str = "", everyone: bool = False
) -> QuerySet[Event]:
    """The audit log, newest first: people's actions, or with `everyone` also the agents' and
    the system's. The console's audit page and the API's `GET audit` both read it here."""
    query = Event.objects.select_related("task", "agent", "operation", "actor_user").order_by(
        "-created_at", "-id"
    )
    if not everyone:
        query = query.filter(PEOPLES_ACTIONS)
    if kind:
        query = query.filter(kind=kind)
    if actor:
        query = query.filter(Q(actor=actor) | Q(actor=f"user:{actor}") | Q(actor=f"agent:{actor}"))
    if agent:
        query = query.filter(Q(agent__name=agent) | Q(task__agent__name=agent))
    if task:
        query = query.filter(task_id=task)
    return query


def audit_event_json(event: Event, masks: Redactor | None = None) -> dict:
    return {
        **event_json(event, masks),
        "task": str(event.task_id) if event.task_id else None,
        "agent": event.agent.name if event.agent_id else None,
        "operation": event.operation_id,
    }


def operation_json(
    operation: Operation, *, with_history: bool = False, masks: Redactor | None = None
) -> dict:
    masks = masks or _Verbatim()
    tool = operation.tool
    body = {
        "id": operation.pk,
        "namespace": operation.namespace,
        "key": masks.text(operation.operation_key),
        "tool": operation.tool,
        "args": masks.apply(operation.args, tool),
        "fingerprint": operation.fingerprint,
        "state": operation.state,
        "task": str(operation.task_id),
        "result": masks.apply(operation.result, tool),
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
                "note": masks.text(r.note),
                "result": masks.apply(r.result, tool),
                "evidence": masks.apply(r.evidence, tool),
                "actor": r.actor,
                "automatic": r.automatic,
                "created_at": r.created_at.isoformat(),
            }  # fmt: skip
            for r in operation.reconciliations.all()
        ]
    return body


# -- sign-in lockouts (django-axes keeps the failures; its rule says who is locked) ----------


@dataclass(frozen=True)
class SigninLockout:
    """Failed sign-ins still counted against one username or one address."""

    by: str  # "username" or "address"
    value: str
    failures: int
    last_failure: datetime
    locked: bool
    until: datetime | None  # when the lock lapses by itself; None: when an admin lifts it

    @property
    def label(self) -> str:
        return f"{self.by} {self.value}"


SIGNIN_TARGETS = (("username", "username"), ("address", "ip_address"))


def _counted_attempts():
    """axes' failure rows that still count: within the cool-off, or all without one."""
    attempts = AccessAttempt.objects.order_by()
    if settings.AXES_COOLOFF_TIME:
        attempts = attempts.filter(attempt_time__gt=timezone.now() - settings.AXES_COOLOFF_TIME)
    return attempts


def signin_failures(*, by: str, value: str) -> int:
    """Failed sign-ins counted against one username or address, as axes counts them."""
    field = dict(SIGNIN_TARGETS)[by]
    total = _counted_attempts().filter(**{field: value}).aggregate(n=Sum("failures_since_start"))
    return total["n"] or 0


def signin_lockouts(limit: int = 200) -> list[SigninLockout]:
    """Usernames and addresses with counted failures: the locked ones first, then most failures.

    Locked means axes refuses them: at least AXES_FAILURE_LIMIT failures within the cool-off.
    A lock lapses when its oldest failures needed to reach the limit fall out of the cool-off.
    """
    cooloff = settings.AXES_COOLOFF_TIME
    failure_limit = settings.AXES_FAILURE_LIMIT
    rows = list(
        _counted_attempts().values_list(
            "username", "ip_address", "failures_since_start", "attempt_time"
        )[:5000]
    )
    found = []
    for by, field in SIGNIN_TARGETS:
        index = 0 if field == "username" else 1
        groups: dict[str, list[tuple[int, datetime]]] = {}
        for row in rows:
            if row[index]:
                groups.setdefault(row[index], []).append((row[2], row[3]))
        for value, failures in groups.items():
            failures.sort(key=lambda item: item[1], reverse=True)  # newest first
            total, until = 0, None
            for count, at in failures:
                total += count
                if until is None and total >= failure_limit:
                    until = at + cooloff if cooloff else None
            locked = total >= failure_limit
            found.append(
                SigninLockout(
                    by=by, value=value, failures=total, last_failure=failures[0][1],
                    locked=locked, until=until if locked else None,
                )
            )  # fmt: skip
    found.sort(key=lambda lockout: (not lockout.locked, -lockout.failures, lockout.label))
    return found[:limit]


def labelled_traces() -> list[loop_eval.Trace]:
    """Every labelled task as a trace: its tool requests in order, with what they returned."""
    ignore = {p.tool: list(p.ignore_fields) for p in ToolPolicy.objects.all()}
    traces = []
    tasks = Task.objects.exclude(loop_label="").prefetch_related("tool_call_rows")
    for task in tasks.order_by("created_at"):
        calls = []
        for row in sorted(task.tool_call_rows.all(), key=lambda r: r.seq):
            call = {"tool": row.tool, "args": row.args, "ignore_fields": ignore.get(row.tool, [])}
            if row.job_id:
                call["job_id"] = row.job_id
            if row.result_kind:
                call["kind"] = row.result_kind
                call["data"] = row.result_data
            calls.append(call)
        label = "loop" if task.loop_label == "real_loop" else "legit"
        traces.append(loop_eval.Trace(str(task.pk), label, task.reason or "", calls))
    return traces
