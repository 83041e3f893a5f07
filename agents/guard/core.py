"""The guard's decision core: pure functions over a `TaskState` (no Django import).

The service layer locks the task row, loads a `TaskState`, calls one function here, writes the
state and the returned `Outcome` back and appends trace rows, all in one transaction. Keeping
the rules free of I/O is what lets them be tested exhaustively and makes every web worker and
agent process decide the same way.

The rules live in small modules by concept; this module is the one import the service needs:

- fingerprint: canonical JSON, call fingerprints, action signatures
- model: the model-call gate and usage settlement
- tool: the tool-request gate and the tool-result report
- window: the detection window and its loop rules (same_call, short_cycle), which the
  console's timeline replays too
- lifecycle: finish, stop, deadline and lease sweeps, resume
- limits: validating admin limits and tightening an agent's requested limits
- report: usage, remaining budget and the stop report
"""

from __future__ import annotations

from agents.guard.fingerprint import action_signature, canonical_json, fingerprint, plan_text
from agents.guard.lifecycle import (
    GRANT_LIMITS,
    STOP_REASONS,
    expire_deadline,
    finish,
    grant_bound,
    grant_excess,
    lease_expired,
    parse_grant,
    release_pending,
    resume,
    seconds_needed,
    stop,
)
from agents.guard.limits import tighten_limits, validate_limits
from agents.guard.model import (
    gate_model_call,
    model_estimate,
    reads_spent_today,
    settle_usage,
    token_cost,
)
from agents.guard.report import build_report, reason_code, remaining, resume_condition, usage
from agents.guard.terms import GuardError, LimitError
from agents.guard.tool import WAIT_RETRY_MS, progress_hash, report_result, request_tool

__all__ = [
    "GRANT_LIMITS",
    "STOP_REASONS",
    "WAIT_RETRY_MS",
    "GuardError",
    "LimitError",
    "action_signature",
    "build_report",
    "canonical_json",
    "expire_deadline",
    "fingerprint",
    "finish",
    "gate_model_call",
    "grant_bound",
    "grant_excess",
    "lease_expired",
    "model_estimate",
    "parse_grant",
    "plan_text",
    "progress_hash",
    "release_pending",
    "reads_spent_today",
    "reason_code",
    "remaining",
    "report_result",
    "request_tool",
    "resume",
    "seconds_needed",
    "resume_condition",
    "settle_usage",
    "stop",
    "tighten_limits",
    "token_cost",
    "usage",
    "validate_limits",
]
