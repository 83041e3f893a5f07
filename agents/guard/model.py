"""The model-call gate and the usage settlement (docs/DESIGN.md section 4, "Model-call gate").

The gate runs *before* the paid call, so every budget is checked against what the call could
cost (the estimate is reserved, tokens and money alike), not against what it did cost.
Settlement then replaces the reservation by the actual usage and is applied even on a stopped
task: the money was spent, and hiding it would make the next phase's budget a lie.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import TypeGuard

from agents.guard.registry import BY_NAME, used
from agents.guard.similarity import lexical, text_similarity
from agents.guard.terms import (
    ALLOW,
    CONTINUE,
    PARTIAL,
    AgentView,
    ModelCallRequest,
    Outcome,
    TaskState,
    UsageReport,
)
from agents.guard.transitions import already_stopped, halt, opening_checks, to_decimal

# How many identical non-empty action signatures in a row mean the model is stuck planning the
# same step. Fixed by docs/DESIGN.md, not a limit.
REPEATED_OUTPUT_RUN = 3

MILLION = Decimal(1_000_000)
COST_PLACES = Decimal("0.000001")


def token_cost(
    per_in: Decimal, per_out: Decimal, prompt_tokens: int, output_tokens: int
) -> Decimal:
    """Money for a number of tokens at prices per million tokens, to six places."""
    amount = (to_decimal(per_in) * prompt_tokens + to_decimal(per_out) * output_tokens) / MILLION
    return amount.quantize(COST_PLACES)


def model_estimate(
    *,
    prompt_tokens: int,
    output_tokens: int,
    per_in: Decimal,
    per_out: Decimal,
    model_default: int | None,
    profile_default: int,
) -> tuple[int, Decimal]:
    """(tokens, cost) a gate reserves. docs/DESIGN.md section 4, check 5.

    The caller's estimate when it gives one (prompt + output tokens above zero). Otherwise the
    model's default from the price table, failing that the profile's default; since nobody
    says how those tokens split between prompt and output, they are priced at the dearer of
    the two rates, so a caller that sends no estimate can never reserve too little money.
    A model call always reserves at least one token.
    """
    given = max(0, int(prompt_tokens)) + max(0, int(output_tokens))
    if given > 0:
        return given, token_cost(per_in, per_out, max(0, prompt_tokens), max(0, output_tokens))
    tokens = max(1, model_default if model_default is not None else profile_default)
    dearer = max(to_decimal(per_in), to_decimal(per_out))
    return tokens, token_cost(dearer, Decimal(0), tokens, 0)


def reads_spent_today(daily_cap: Decimal | None) -> TypeGuard[Decimal]:
    """Whether `gate_model_call` reads the agent's spend today: only the daily cap does, so
    without a cap the caller need not fetch the day's total (it still books the reservation)."""
    return daily_cap is not None


# What the gate counts against these budgets (taken plus reserved): the console's bars and the
# report's `remaining` count the same, `registry.used`.
_TOKENS = BY_NAME["max_tokens"]
_COST = BY_NAME["max_cost"]


def gate_model_call(
    task: TaskState, req: ModelCallRequest, agent: AgentView, now: datetime
) -> Outcome:
    """Checks 1-8 of the model-call gate, in order; ALLOW counts the call and reserves tokens
    and cost. A model call is never free of tokens: the token estimate counts as one at least.
    """
    if (stopped := opening_checks(task, agent, now)) is not None:
        return stopped
    limits = task.limits
    if task.model_calls >= limits.max_model_calls:
        return halt(task, PARTIAL, "model_budget")
    tokens = max(1, int(req.estimate_tokens))
    if used(_TOKENS, task) + tokens > limits.max_tokens:
        return halt(task, PARTIAL, "token_budget")
    # A negative estimate would release other calls' reservations; the gate never trusts it.
    estimate = max(Decimal("0"), to_decimal(req.estimate_cost))
    if used(_COST, task) + estimate > to_decimal(limits.max_cost):
        return halt(task, PARTIAL, "cost_budget")
    if reads_spent_today(agent.daily_cap) and to_decimal(agent.spent_today) + estimate > (
        to_decimal(agent.daily_cap)
    ):
        return halt(task, PARTIAL, "spend_cap")
    task.model_calls += 1
    task.tokens_reserved += tokens
    task.cost_reserved += estimate
    return Outcome(decision=ALLOW)


def settle_usage(task: TaskState, usage: UsageReport, now: datetime) -> Outcome:
    """Replace the reservation by the actual usage, then look for repeated output.

    Accounting happens first and unconditionally (a stop never hides spent money). The
    reservations are released only down to zero: a usage report for a reservation that already
    expired (and was charged as reserved) must not make the outstanding reservations negative.
    Repetition is only judged on a running task; a stopped one answers STOP unchanged otherwise.
    """
    task.cost_reserved = max(Decimal("0"), task.cost_reserved - to_decimal(usage.reserved_cost))
    task.cost_spent += to_decimal(usage.actual_cost)
    task.tokens_reserved = max(0, task.tokens_reserved - max(0, int(usage.reserved_tokens)))
    task.tokens_used += max(0, int(usage.tokens))
    if task.terminal:
        return already_stopped(task)
    run = note_plan(task.signatures, usage.signature)
    marks: dict[str, int | str] | None = {"same_plan": run} if run > 1 else None
    if run == REPEATED_OUTPUT_RUN:
        outcome = halt(task, PARTIAL, "repeated_output")
    else:
        threshold = task.limits.near_duplicate_threshold
        if threshold is not None and _similar_output(task, usage, threshold):
            outcome = halt(task, PARTIAL, "repeated_output")
        else:
            outcome = Outcome(decision=CONTINUE)
    outcome.marks = marks
    return outcome


def note_plan(signatures: list[str], signature: str) -> int:
    """A settled plan joins the streak: `signature` is appended to `signatures` (the task's
    last REPEATED_OUTPUT_RUN, newest last, trimmed here), and the answer is how many identical
    non-empty signatures the streak now ends with (0 for a turn without a tool call).
    REPEATED_OUTPUT_RUN of them is repeated output.

    The rule itself: settle_usage counts with it and marks the report's row with the count
    (`Outcome.marks`, "same_plan"), which the console's timeline shows.
    """
    signatures.append(signature)
    del signatures[:-REPEATED_OUTPUT_RUN]
    run = 0
    for earlier in reversed(signatures):
        if not signature or earlier != signature:
            break
        run += 1
    return run


def _similar_output(task: TaskState, usage: UsageReport, threshold: float) -> bool:
    """Repeated output by similarity, only when a threshold is set (docs/DESIGN.md section 4, 8).

    Plans: three non-empty plans in a row, each similar to the one before it (a plan that
    drifts a little each round is the same plan). Reflections: two texts in a row whose
    similarity reaches the threshold. Both streaks restart with the signatures' (progress,
    a status poll).
    """
    task.plans.append(usage.plan_text if usage.signature else "")
    del task.plans[:-REPEATED_OUTPUT_RUN]
    plans = task.plans
    if (
        len(plans) == REPEATED_OUTPUT_RUN
        and all(plans)
        and all(lexical(a, b) >= threshold for a, b in zip(plans, plans[1:], strict=False))
    ):
        return True
    previous, task.reflection = task.reflection, usage.output_text.strip()
    return bool(previous and task.reflection) and (
        text_similarity(previous, task.reflection) >= threshold
    )
