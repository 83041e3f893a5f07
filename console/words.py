"""What states, reasons and decisions mean, in the words an operator reads at 3 a.m."""

from __future__ import annotations

from agents.guard import registry
from agents.models import EventKind

STATE_WORDS = {
    "RUNNING": "Running",
    "COMPLETED": "Completed",
    "PARTIAL": "Stopped part-way",
    "FAILED": "Failed",
    "NEEDS_HUMAN": "Needs a human",
    "STOPPED": "Stopped",
}

REASON_WORDS = {
    "goal_met": "The goal was met, and the verifier's evidence says so.",
    "goal_unverified": "The agent said it was done, but no evidence shows the goal was met.",
    "deadline": "The task ran out of time.",
    "invalid_wait": "A tool asked to retry or poll without saying how long to wait.",
    "model_budget": "The task used all of its model calls.",
    "request_budget": "The task used all of its tool requests.",
    "execution_budget": "The task used all of its tool executions.",
    "retry_budget": "The tool calls were retried more often than allowed.",
    "poll_budget": "A pending job was polled more often than allowed.",
    "token_budget": "The task used all of its tokens.",
    "cost_budget": "The task reached its cost limit.",
    "spend_cap": "The agent reached its daily spend cap.",
    "same_call": "The agent kept repeating the same tool call with the same arguments.",
    "short_cycle": "The agent went round in a short cycle of calls (A → B → A → B).",
    "no_progress": "Several steps in a row made no verified progress.",
    "repeated_output": "The model planned the very same step three times in a row.",
    "near_duplicate": "The agent kept repeating nearly identical tool calls.",
    "missing_operation_key": "A write tool was called without an operation key.",
    "operation_conflict": "An operation key was reused for a different write.",
    "unknown_commit": "A write may or may not have happened: its outcome is unknown.",
    "bad_result": "A tool reported a result of an unknown kind.",
    "invalid_evidence": "The verifier's evidence was not valid.",
    "executor_error": "A tool gave no result.",
    "fatal": "A tool failed with a fatal error.",
    "precondition": "A tool's precondition was not met.",
    "operator_stop": "An operator stopped the task.",
    "agent_stop": "The agent stopped the task itself.",
    "agent_paused": "The agent was paused (kill switch).",
}

CODE_WORDS = {
    "GUARD_ROUND_LIMIT": "round limits",
    "GUARD_TIME_LIMIT": "time limits",
    "GUARD_TOKEN_LIMIT": "token limits",
    "GUARD_COST_LIMIT": "cost limits",
    "GUARD_LOOP_DETECTED": "loops detected",
    "GUARD_LEDGER": "ledger (writes)",
    "GUARD_BAD_INPUT": "bad input",
    "GUARD_TOOL_FAILED": "tool failures",
    "GUARD_STOPPED": "stopped by people or agents",
}

EVENT_WORDS = dict(EventKind.choices)

# The grant dimensions of a resume: (grant, its name, the limit it raises, the usage it is
# measured by, None for the clock).
GRANTS = tuple(
    (spec.grant, spec.title, spec.name, None if spec.usage == registry.CLOCK else spec.usage)
    for spec in registry.GRANTS
    if spec.grant
)

LIMIT_WORDS = {spec.name: spec.label for spec in registry.LIMITS}


def state_words(state: str) -> str:
    return STATE_WORDS.get(state, state)


def reason_words(reason: str) -> str:
    return REASON_WORDS.get(reason, reason.replace("_", " "))
