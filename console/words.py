"""What states, reasons and decisions mean, in the words an operator reads at 3 a.m."""

from __future__ import annotations

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

EVENT_WORDS = {
    "task_created": "created the task",
    "stop_requested": "asked to stop",
    "task_stopped": "task stopped",
    "task_completed": "task completed",
    "task_resumed": "resumed the task",
    "limits_changed": "changed the task's limits",
    "operation_reconciled": "reconciled an operation",
    "guard_trigger": "guard triggered",
    "lease_expired": "a write's lease expired",
    "late_result": "a late result arrived",
    "finish_requested": "asked to finish",
    "trigger_loop": "trigger loop refused",
    "agent_paused": "paused the agent",
    "agent_unpaused": "unpaused the agent",
    "profile_created": "created a limit profile",
    "profile_changed": "changed a limit profile",
    "profile_deleted": "deleted a limit profile",
    "tool_policy_changed": "changed a tool policy",
    "agent_profiles_changed": "changed the profiles an agent may use",
    "token_issued": "issued an API token",
    "token_revoked": "revoked an API token",
    "signin_locked_out": "locked out of sign-in",
    "signin_unlocked": "lifted a sign-in lockout",
}

# The grant dimensions of a resume, with the limit each raises and the usage it is measured by.
GRANTS = (
    ("model_calls", "Model calls", "max_model_calls", "model_calls"),
    ("tool_requests", "Tool requests", "max_tool_requests", "tool_requests"),
    ("tool_executions", "Tool executions", "max_tool_executions", "tool_executions"),
    ("retries", "Retries", "max_retries", "retries"),
    ("polls", "Polls", "max_polls", "polls"),
    ("tokens", "Tokens", "max_tokens", "tokens_used"),
    ("cost", "Cost", "max_cost", "cost_spent"),
    ("seconds", "Seconds", "deadline_seconds", None),
)

LIMIT_WORDS = {
    "max_model_calls": "Model calls",
    "max_tool_requests": "Tool requests",
    "max_tool_executions": "Tool executions",
    "max_same_call": "Same call allowed (times)",
    "repeat_action": "On a repeat",
    "max_cycle_period": "Longest cycle detected",
    "max_stagnant": "Steps without progress",
    "max_retries": "Retries",
    "max_polls": "Polls",
    "deadline_seconds": "Deadline (seconds)",
    "max_tokens": "Tokens",
    "max_cost": "Cost",
    "progress_mode": "Progress counts",
    "near_duplicate_threshold": "Near-duplicate similarity (0–1, blank: off)",
    "lease_seconds": "Write lease (seconds)",
    "default_estimate_tokens": "Tokens reserved by a gate without an estimate",
    "max_tasks_per_trigger": "Tasks per trigger",
    "trigger_window_seconds": "Trigger window (seconds)",
}


def state_words(state: str) -> str:
    return STATE_WORDS.get(state, state)


def reason_words(reason: str) -> str:
    return REASON_WORDS.get(reason, reason.replace("_", " "))
