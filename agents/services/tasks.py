"""Creating tasks: limits from the profile, tightened by the agent; trigger rate limit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from agents.db.prepared import decision_transaction, insert_row
from agents.errors import Conflict, Forbidden, TriggerLoop
from agents.guard import core, terms
from agents.guard.registry import PROFILE_DEFAULTS
from agents.models import Agent, Event, EventKind, LimitProfile, Phase, Task
from agents.redaction import masked_search_text

DEFAULT_PROFILE = "default"


def default_profile(agent: Agent) -> LimitProfile | None:
    """The agent's own default profile, else the one named "default", else None (built-ins).

    Held until the transaction ends (`LimitProfile.objects.held`), as is a granted one below:
    the task about to be created points at it, so a delete must not slip in between.
    """
    if agent.default_profile_id:
        return LimitProfile.objects.filter(pk=agent.default_profile_id).first_held()
    return LimitProfile.objects.filter(name=DEFAULT_PROFILE).first_held()


def resolve_profile(agent: Agent, name: str | None) -> LimitProfile | None:
    """The profile a new task copies: the agent's default, or one an admin granted it.

    Any other name, whether or not such a profile exists, answers 403 PROFILE_NOT_ALLOWED:
    an agent must not loosen its own guard by naming a looser profile, nor learn which
    profiles exist by trying names.
    """
    default = default_profile(agent)
    if not name or (default is not None and name == default.name):
        return default
    granted = agent.allowed_profiles.filter(name=name).first_held()
    if granted is None:
        raise Forbidden(
            f"This agent may not use the profile {name!r}; an admin may grant it.",
            code="PROFILE_NOT_ALLOWED",
            fields={"profile": "not allowed for this agent"},
        )
    return granted


def task_create(
    *,
    agent: Agent,
    goal: str,
    profile: str | None = None,
    limits: dict[str, Any] | None = None,
    external_ref: str = "",
    trigger_key: str = "",
) -> Task:
    """Create a task in phase 1 with its profile's limits (tightened by `limits`).

    Locks the agent row while counting the trigger's recent tasks, so racing creations
    cannot slip past `max_tasks_per_trigger` together. Past it: 429 TRIGGER_LOOP. A paused
    agent creates nothing: 409 AGENT_PAUSED, checked under the same lock, so a task created
    while an admin pauses the agent is either refused or stopped by its first call.
    A profile the agent is not allowed answers 403 PROFILE_NOT_ALLOWED; it is resolved under
    the agent lock too, which an admin's grant change also takes.
    """
    now = timezone.now()
    refused: TriggerLoop | None = None
    with decision_transaction():
        locked = Agent.objects.select_for_update().filter(pk=agent.pk).first()
        if locked is not None and locked.paused:
            raise Conflict(
                "This agent is paused; it may not create tasks until an operator unpauses it.",
                code="AGENT_PAUSED",
            )
        chosen = resolve_profile(locked or agent, profile)
        base = chosen.limits() if chosen else terms.Limits()
        try:
            task_limits = core.tighten_limits(base, limits or {})
        except terms.LimitError as exc:
            # Well formed but not this agent's to ask for: a permission matter, like a profile
            # the agent may not use.
            raise Forbidden(
                "Limits may only be tightened.",
                code="LIMITS_NOT_ALLOWED",
                fields={f"limits.{k}": v for k, v in exc.fields.items()},
            ) from None
        if trigger_key:
            rate = {k: getattr(chosen, k) for k in PROFILE_DEFAULTS} if chosen else PROFILE_DEFAULTS
            per_trigger, window = rate["max_tasks_per_trigger"], rate["trigger_window_seconds"]
            recent = Task.objects.filter(
                agent=agent, trigger_key=trigger_key,
                created_at__gte=now - timedelta(seconds=window),
            ).count()  # fmt: skip
            if recent >= per_trigger:
                Event.objects.create(
                    agent=agent, kind=EventKind.TRIGGER_LOOP, actor=f"agent:{agent.name}",
                    reason=trigger_key, code="TRIGGER_LOOP",
                    detail={"trigger_key": trigger_key, "recent": recent, "limit": per_trigger},
                )  # fmt: skip
                refused = TriggerLoop(
                    f"Trigger {trigger_key!r} created {recent} tasks in the last {window} s; "
                    f"the limit is {per_trigger}. An outer workflow is probably restarting "
                    "the task.",
                    code="TRIGGER_LOOP",
                )
        if refused is None:
            task = Task(
                agent=agent,
                profile=chosen,
                goal=goal,
                external_ref=external_ref or "",
                masked_search=masked_search_text(goal, external_ref or ""),
                trigger_key=trigger_key or "",
                limits=task_limits.to_dict(),
                initial_limits=task_limits.to_dict(),
                deadline_at=now + timedelta(seconds=task_limits.deadline_seconds),
            )
            # The three rows go to the database together as the transaction ends.
            insert_row(task)
            insert_row(Phase(task=task, number=1, reason="created"))
            insert_row(Event(
                task=task, agent=agent, kind=EventKind.TASK_CREATED, phase=1,
                actor=f"agent:{agent.name}",
                detail={"profile": chosen.name if chosen else None, "limits": limits or {}},
            ))  # fmt: skip
    if refused is not None:
        # Raised once the block has committed: the refusal's audit event must survive it.
        raise refused
    return task
