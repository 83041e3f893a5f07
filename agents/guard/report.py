"""Usage, remaining budget and the stop report (docs/DESIGN.md section 4, "Stop report").

The report is what an operator reads first and what the agent gets back on every later call,
so it says in one place: what state and why, what was verifiably done, which ledger rows need a
human, what was consumed, and what it takes to go on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from agents.guard.registry import BUDGET_GRANTS, CLOCK, GRANTS, MONEY, used
from agents.guard.terms import COMPLETED, IN_FLIGHT, REASON_CODES, UNKNOWN, TaskState
from agents.guard.transitions import to_decimal

COST_QUANTUM = Decimal("0.0001")


def _money(amount: Decimal) -> str:
    return str(to_decimal(amount).quantize(COST_QUANTUM, rounding=ROUND_HALF_UP))


def reason_code(reason: str | None) -> str | None:
    """The upstream code for a reason (GUARD_LOOP_DETECTED, ...); None for goal_met or none."""
    if reason is None:
        return None
    return REASON_CODES.get(reason)


def usage(task: TaskState) -> dict[str, Any]:
    """What the task consumed over all phases, by grant. Cost is settled spend, 4 decimals as
    text."""
    out: dict[str, Any] = {}
    for spec in GRANTS:
        if spec.usage and spec.usage != CLOCK:
            taken = getattr(task, spec.usage)
            out[spec.grant or spec.name] = _money(taken) if spec.kind == MONEY else taken
    return out


def remaining(task: TaskState) -> dict[str, Any]:
    """What is left under the current limits, never negative.

    Remaining tokens and cost also subtract outstanding reservations: they are promised to
    model calls in progress and cannot be spent again.
    """
    out: dict[str, Any] = {}
    for spec in GRANTS:
        if spec.remaining:
            left = to_decimal(getattr(task.limits, spec.name)) - used(spec, task)
            left = max(Decimal("0"), left)
            out[spec.grant or spec.name] = _money(left) if spec.kind == MONEY else int(left)
    return out


# What to fix before a resume makes sense, for the reasons that are not a budget.
FIX_FIRST = {
    "goal_unverified": "Verify the outcome; if work remains,",
    "spend_cap": "Wait for the agent's daily spend to reset or raise its daily cap; then",
    "same_call": "Change the plan so the agent stops repeating the same call; then",
    "short_cycle": "Change the plan so the agent stops cycling between the same calls; then",
    "no_progress": "Check why the steps made no verified progress and change the plan; then",
    "repeated_output": "Check why the model keeps planning the same step; then",
    "near_duplicate": "Change the plan so the agent stops repeating near-identical calls; then",
    "missing_operation_key": "Give every write tool call an operation_key; then",
    "operation_conflict": "Use a distinct operation_key for each distinct write; then",
    "unknown_commit": "Reconcile the write whose commit is unknown; then",
    "bad_result": "Fix the tool adapter so it reports a known result kind; then",
    "invalid_evidence": "Fix the verifier so its evidence has a current revision and done; then",
    "invalid_wait": "Fix the tool adapter so RETRYABLE and PENDING give a wait_ms above 0; then",
    "executor_error": "Find out why the tool gave no result; then",
    "fatal": "Fix the cause of the tool's fatal error; then",
    "precondition": "Satisfy the tool's precondition; then",
    "operator_stop": "Once the operator's concern is addressed,",
    "agent_stop": "If the agent should go on,",
    "agent_paused": "Unpause the agent; then",
}


def resume_condition(task: TaskState, operations: list[dict[str, Any]]) -> str:
    """One sentence: what must happen before an operator may resume this task.

    Open ledger rows come first whatever the reason, because the service refuses a resume
    while any operation of the task is UNKNOWN or IN_FLIGHT.
    """
    if task.state == COMPLETED:
        return "The goal was met; there is nothing to resume."
    unknown = [op["key"] for op in operations if op.get("state") == UNKNOWN]
    in_flight = [op["key"] for op in operations if op.get("state") == IN_FLIGHT]
    if unknown or in_flight:
        parts = []
        if unknown:
            noun = "operation" if len(unknown) == 1 else "operations"
            parts.append(f"Reconcile {noun} {', '.join(unknown)}")
        if in_flight:
            noun = "operation" if len(in_flight) == 1 else "operations"
            verb = "Wait for or reconcile" if not parts else "wait for or reconcile"
            parts.append(f"{verb} in-flight {noun} {', '.join(in_flight)}")
        return f"{_refused_evidence(task)}{' and '.join(parts)}, then an operator may resume."
    reason = task.reason or ""
    if reason == "unknown_commit":
        # Asked again after the stop (the console's "Next step"): every write is settled now.
        return "Every write of the task has a known outcome now; an operator may resume."
    if reason in BUDGET_GRANTS:
        return (
            f"An operator may resume with a {BUDGET_GRANTS[reason]} grant "
            f"({reason.replace('_', ' ')} reached)."
        )
    if refused := _refused_evidence(task):
        return f"{refused}Then an operator may resume."
    prefix = FIX_FIRST.get(reason, "When the cause is addressed,")
    return f"{prefix} an operator may resume."


def _refused_evidence(task: TaskState) -> str:
    """The field of the evidence that stopped the task on this call, as the report's first
    words (the result's answer says exactly what to fix); empty otherwise."""
    if task.reason != "invalid_evidence" or not task.stop_detail:
        return ""
    return f"Fix the verifier: {task.stop_detail}. "


def _iso_z(moment: datetime) -> str:
    """ISO 8601 in UTC with a Z, to the second. Naive datetimes are taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_report(
    task: TaskState, now: datetime, operations: list[dict[str, Any]]
) -> dict[str, Any]:
    """Build the stop report, store it on `task.report` and return it.

    The service calls this once, when an outcome has `stopped_now`; afterwards the stored report
    is returned unchanged. `operations` are the task's ledger rows as {"key", "state"}.
    """
    ops = [{"key": op["key"], "state": op["state"]} for op in operations]
    report = {
        "state": task.state,
        "reason": task.reason,
        "code": reason_code(task.reason),
        "phase": task.phase,
        "at": _iso_z(now),
        "completed": list(task.milestones),
        "operations": ops,
        "usage": usage(task),
        "remaining": remaining(task),
        "resume_condition": resume_condition(task, ops),
    }
    task.report = report
    return report
