"""Finishing, stopping, the background sweeps, and an operator's resume.

These are the only ways a task's state changes outside the two gates. Each of them respects the
sticky stop: once terminal, only `resume` (an operator's authorized decision) reopens a task,
and it opens a new phase on top of the consumed usage instead of resetting anything.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from agents.guard.limits import COST_PLACES, decimal_places, largest
from agents.guard.registry import GRANT_LIMITS
from agents.guard.terms import (
    COMPLETED,
    CONTINUE,
    GUARD_STOPPED,
    NEEDS_HUMAN,
    PARTIAL,
    REASON_CODES,
    RUNNING,
    STOPPED,
    GuardError,
    Limits,
    Outcome,
    TaskState,
)
from agents.guard.transitions import (
    already_stopped,
    halt,
    note_milestone,
    parse_evidence,
    to_decimal,
)

# The stops by a person or an agent: the reasons whose code is GUARD_STOPPED (never a trip).
STOP_REASONS = tuple(reason for reason, code in REASON_CODES.items() if code == GUARD_STOPPED)


def finish(task: TaskState, evidence: Any, now: datetime) -> Outcome:
    """The agent says it is done. Only verified `done` evidence makes the task COMPLETED.

    Valid evidence is taken (revision, milestone) even when it does not say done: it is the
    verifier's word about where the task stands, and the report's `completed` list should show
    it. Anything else, including malformed evidence, is goal_unverified: the agent's claim is
    text, not proof.
    """
    if task.terminal:
        return already_stopped(task)
    parsed, valid = parse_evidence(evidence, task.revision)
    if valid and parsed is not None:
        task.revision = max(task.revision, parsed.revision)
        note_milestone(task, parsed)
        if parsed.done:
            return halt(task, COMPLETED, "goal_met")
    return halt(task, PARTIAL, "goal_unverified")


def stop(task: TaskState, reason: str, now: datetime) -> Outcome:
    """Operator or agent stop (or the agent's pause). Idempotent: a stopped task stays as it is."""
    if reason not in STOP_REASONS:
        raise GuardError("BAD_REASON", f"A stop reason must be one of {', '.join(STOP_REASONS)}.")
    if task.terminal:
        return already_stopped(task)
    return halt(task, STOPPED, reason)


def expire_deadline(task: TaskState, now: datetime) -> Outcome:
    """The deadline sweep: a RUNNING task past its deadline becomes PARTIAL/deadline.

    The sweep may race with a request that already stopped the task; a terminal task answers
    STOP unchanged, a running one within its deadline CONTINUE unchanged.
    """
    if task.terminal:
        return already_stopped(task)
    if now >= task.deadline_at:
        return halt(task, PARTIAL, "deadline")
    return Outcome(decision=CONTINUE)


def lease_expired(task: TaskState, now: datetime) -> Outcome:
    """An IN_FLIGHT write of this task outlived its lease: its commit is unknown, a human decides.

    The service marks the operation UNKNOWN itself (it holds the row); a task that is already
    terminal keeps its own stop.
    """
    if task.state != RUNNING:
        return already_stopped(task)
    return halt(task, NEEDS_HUMAN, "unknown_commit")


def release_pending(task: TaskState, fingerprint: str) -> None:
    """An execution whose claim expired or was reconciled leaves the pending set.

    It is no longer in flight: whatever became of it, its result will not be awaited, and
    counting it as a pending repeat forever would answer a later, committed request with
    BLOCK instead of REUSE. Done on a stopped task too: it is bookkeeping, not a decision.
    The service calls it once per execution (it marks the call released).
    """
    if fingerprint in task.pending:
        task.pending.remove(fingerprint)


def grant_bound(original: Limits) -> dict[str, int | Decimal]:
    """The most a non-admin operator may grant per resume, per budget: the task's original
    limit for that budget (what it was created with). Larger grants need an admin."""
    return {key: getattr(original, limit_name) for key, limit_name in GRANT_LIMITS.items()}


def grant_excess(grant: dict[str, Any], original: Limits) -> dict[str, str]:
    """Each grant dimension above `grant_bound`, with a sentence for the operator."""
    bound = grant_bound(original)
    excess: dict[str, str] = {}
    for key, value in grant.items():
        if key not in bound or value is None:
            continue
        top = to_decimal(bound[key]) if key == "cost" else bound[key]
        amount = to_decimal(value) if key == "cost" else value
        if amount > top:
            excess[key] = (
                f"At most {top} per resume for an operator (the task's original limit); "
                "an admin may grant more."
            )
    return excess


def _largest(key: str) -> int | Decimal:
    """The largest grant of a dimension, and the largest limit it may raise (its column's)."""
    return largest(GRANT_LIMITS[key])


def parse_grant(grant: Any) -> dict[str, int | Decimal]:
    """The one reading of a resume grant: the operator service (console text and API JSON
    alike) and `resume` both call it. Raises GuardError BAD_GRANT naming every bad field in
    `fields` ("grant.<dimension>", as the resume request names it); a bad grant changes
    nothing.

    Returns the dimensions given (an absent, null or empty one grants nothing): a count as an
    int (numeric text is read as a number, a fraction or a boolean is refused), the cost as a
    finite Decimal of at most six places; none may be negative or larger than the limit it
    raises may be (`resume` checks the sum).
    """
    grant = grant or {}
    if not isinstance(grant, dict):
        raise GuardError("BAD_GRANT", "grant must be an object.", fields={"grant": "object"})
    errors: dict[str, str] = {}
    parsed: dict[str, int | Decimal] = {}
    for key, value in grant.items():
        if key not in GRANT_LIMITS:
            errors[key] = f"unknown grant; use one of {', '.join(GRANT_LIMITS)}"
            continue
        if value in (None, ""):
            continue
        try:
            number = Decimal(str(value)) if key == "cost" else int(value)
        except (TypeError, ValueError, ArithmeticError):
            errors[key] = "must be a number"
            continue
        if isinstance(value, bool) or (key != "cost" and isinstance(value, float)):
            errors[key] = "must be a whole number"
            continue
        if isinstance(number, Decimal) and not number.is_finite():
            errors[key] = "must be a finite amount"
            continue
        if number < 0:
            errors[key] = "must be zero or more"
            continue
        if isinstance(number, Decimal) and decimal_places(number) > COST_PLACES:
            errors[key] = f"at most {COST_PLACES} decimal places"
            continue
        if number > _largest(key):
            errors[key] = f"must be at most {_largest(key)}"
            continue
        parsed[key] = number
    if errors:
        fields = {f"grant.{key}": sentence for key, sentence in errors.items()}
        raise GuardError("BAD_GRANT", "The grant is not valid.", fields=fields)
    return parsed


def seconds_needed(task: TaskState, now: datetime) -> int:
    """The least `grant.seconds` that puts the task's deadline ahead of `now` (0 when it is
    ahead already). The gates stop a task once `now >= deadline_at`, so a resume that leaves
    the deadline there would stop again at the agent's next call: PARTIAL/deadline."""
    behind = (now - task.deadline_at).total_seconds()
    return 0 if behind < 0 else math.floor(behind) + 1


def resume(task: TaskState, grant: dict[str, Any] | None, now: datetime) -> None:
    """Open the next phase of a stopped task. Raises GuardError and changes nothing if refused.

    Usage counters keep accumulating across phases (a resume is not a reset: that is how an
    outer loop of resumes stays visible and bounded); each grant raises its limit instead. The
    window and blocked markers stay, so the calls that looped are still remembered; `stagnant`
    starts again because the operator judged that something changed. A grant that leaves the
    deadline at or before `now` is refused (DEADLINE_PASSED, naming `seconds_needed`). The
    service refuses the resume earlier when an operation of the task is UNKNOWN or IN_FLIGHT.
    """
    if task.state == RUNNING:
        raise GuardError("TASK_RUNNING", "The task is running; there is nothing to resume.")
    if task.state == COMPLETED:
        raise GuardError("TASK_COMPLETED", "The task is completed; it cannot be resumed.")
    parsed = parse_grant(grant)
    limits = task.limits
    raised: dict[str, int | Decimal] = {}
    errors: dict[str, str] = {}
    for key, limit_name in GRANT_LIMITS.items():
        if key not in parsed:
            continue
        current = to_decimal(limits.max_cost) if key == "cost" else getattr(limits, limit_name)
        raised[limit_name] = current + parsed[key]
        if raised[limit_name] > _largest(key):
            errors[f"grant.{key}"] = (
                f"would raise {limit_name} to {raised[limit_name]}, past its largest value "
                f"{_largest(key)}"
            )
    try:
        deadline = task.deadline_at + timedelta(seconds=int(parsed.get("seconds", 0)))
    except OverflowError:
        errors["grant.seconds"] = "would move the deadline past the last date there is"
    if errors:
        raise GuardError("BAD_GRANT", "The grant is not valid.", fields=errors)
    needed = seconds_needed(task, now)
    if int(parsed.get("seconds", 0)) < needed:
        raise GuardError(
            "DEADLINE_PASSED",
            f"The deadline passed {needed - 1} s ago: grant at least {needed} seconds so that "
            "it lies ahead of now, or the agent's next call stops again.",
            fields={"grant.seconds": f"at least {needed} seconds", "seconds_needed": needed},
        )
    for limit_name, value in raised.items():
        setattr(limits, limit_name, value)
    task.deadline_at = deadline
    task.stagnant = 0
    task.phase += 1
    task.state = RUNNING
    task.reason = None
    task.report = None
