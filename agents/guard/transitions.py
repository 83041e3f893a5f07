"""The few moves every guard rule shares: stopping a task, answering a stopped one, the
opening checks of both gates, and accepting the application's evidence.

Kept in one place so a stop is written the same way by every rule: state and reason set once,
`stopped_now` true only on the call that wrote it (the service builds the report and the stop
event exactly then), and a terminal task answered without being touched (stops are sticky).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, TypeGuard

from loopwarden_client.evidence import evidence_problem

from agents.guard.terms import PARTIAL, STOP, STOPPED, AgentView, Outcome, TaskState


def halt(task: TaskState, state: str, reason: str, **extra: Any) -> Outcome:
    """Move a RUNNING task to a terminal `state` for `reason`; the decision is STOP."""
    task.state = state
    task.reason = reason
    return Outcome(decision=STOP, reason=reason, stopped_now=True, **extra)


def already_stopped(task: TaskState, **extra: Any) -> Outcome:
    """The answer for any call on a terminal task: STOP with the stored reason, nothing changed."""
    return Outcome(decision=STOP, reason=task.reason, stopped_now=False, **extra)


def opening_checks(task: TaskState, agent: AgentView, now: datetime) -> Outcome | None:
    """Checks 1-3 of both gates (docs/DESIGN.md section 4), in this order; None when all pass.

    1. terminal: STOP with the stored report, nothing counted (stops are sticky);
    2. agent paused: STOPPED/agent_paused; 3. deadline passed: PARTIAL/deadline.
    Written once so the model-call gate and the tool request can never disagree on them.
    """
    if task.terminal:
        return already_stopped(task)
    if agent.paused:
        return halt(task, STOPPED, "agent_paused")
    if now >= task.deadline_at:
        return halt(task, PARTIAL, "deadline")
    return None


def to_decimal(value: Any) -> Decimal:
    """Money as Decimal whatever the caller passed (Decimal, int, str, float via its repr).

    Floats go through str() so 0.1 stays 0.1 instead of its binary expansion.
    """
    if isinstance(value, Decimal):
        return value
    if value is None:
        return Decimal("0")
    if isinstance(value, bool):
        raise ValueError("a boolean is not an amount")
    try:
        return Decimal(str(value))
    except InvalidOperation as exc:
        raise ValueError(f"not an amount: {value!r}") from exc


def is_int(value: object) -> TypeGuard[int]:
    """An int that is not a bool: JSON `true` must never pass for a revision or a count."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class Evidence:
    """The application's verifier speaking, after validation. Only this moves the revision."""

    revision: int
    done: bool
    committed: bool | None = None
    milestone: str | None = None


def parse_evidence(raw: Any, current_revision: int) -> tuple[Evidence | None, bool]:
    """(evidence or None, valid). Absent evidence is valid and None.

    The revision may not go backwards: a verifier reporting an older revision than the task
    already holds is confused or replaying, and its word cannot be trusted for anything else in
    the same report (done, committed) either.
    """
    if raw is None:
        return None, True
    # The client refuses the same shapes where evidence is written (one rule, its words).
    # Optional fields sent as JSON null read as absent: "the verifier does not say".
    if not isinstance(raw, dict) or evidence_problem(raw, current_revision) is not None:
        return None, False
    return Evidence(
        revision=raw["revision"],
        done=raw["done"],
        committed=raw.get("committed"),
        milestone=raw.get("milestone"),
    ), True


def note_milestone(task: TaskState, evidence: Evidence | None) -> None:
    """Remember a verified milestone once, in the order first reached (the report's `completed`)."""
    if evidence is not None and evidence.milestone and evidence.milestone not in task.milestones:
        task.milestones.append(evidence.milestone)


def restart_streak(task: TaskState) -> None:
    """The repeated-output streak starts again (verified progress, a status poll): the plans
    and reflection compared by similarity go with the signatures they stand beside."""
    task.signatures.clear()
    task.plans.clear()
    task.reflection = ""
