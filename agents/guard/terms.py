"""The guard's terms: its states, decisions, reasons and limits, and the plain data the core
decides on. No Django import anywhere in agents.guard. Import it whole, `from agents.guard import
terms`, and name what you use (`terms.RUNNING`, `terms.TaskState`).

The service layer loads a `TaskState` from the locked task row, hands it to a core function
which mutates it in place and returns an outcome, then writes the state back in the same
transaction. Everything the core needs to decide lives on the task row (counters, window,
signatures), so a decision costs the same at call 10 and at call 5,000.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from functools import cached_property
from typing import Any

from agents.guard.fingerprint import fingerprint
from agents.guard.novelty import ResultRules

# The limits are declared in the registry; `terms.Limits` names them with the core's other terms.
from agents.guard.registry import Limits as Limits

# -- states, decisions, reasons -------------------------------------------------------------

RUNNING = "RUNNING"
COMPLETED = "COMPLETED"
PARTIAL = "PARTIAL"
FAILED = "FAILED"
NEEDS_HUMAN = "NEEDS_HUMAN"
STOPPED = "STOPPED"
TASK_STATES = (RUNNING, COMPLETED, PARTIAL, FAILED, NEEDS_HUMAN, STOPPED)
TERMINAL_STATES = frozenset({COMPLETED, PARTIAL, FAILED, NEEDS_HUMAN, STOPPED})

ALLOW = "ALLOW"
EXECUTE = "EXECUTE"
REUSE = "REUSE"
BLOCK = "BLOCK"
WAIT = "WAIT"
STOP = "STOP"
CONTINUE = "CONTINUE"
DECISIONS = (ALLOW, EXECUTE, REUSE, BLOCK, WAIT, STOP, CONTINUE)

READ = "read"
WRITE = "write"

# Ledger operation states.
IN_FLIGHT = "IN_FLIGHT"
OP_COMMITTED = "COMMITTED"
UNKNOWN = "UNKNOWN"
NOT_COMMITTED = "NOT_COMMITTED"
OPERATION_STATES = (IN_FLIGHT, OP_COMMITTED, UNKNOWN, NOT_COMMITTED)

# Tool result kinds.
SUCCESS = "SUCCESS"
RETRYABLE = "RETRYABLE"
PENDING = "PENDING"
PRECONDITION = "PRECONDITION"
FATAL = "FATAL"
NO_RESULT = "NO_RESULT"
RESULT_KINDS = (SUCCESS, RETRYABLE, PENDING, PRECONDITION, FATAL, NO_RESULT)

REASON_CODES: dict[str, str | None] = {
    "goal_met": None,
    "goal_unverified": None,
    "deadline": "GUARD_TIME_LIMIT",
    "invalid_wait": "GUARD_TIME_LIMIT",
    "model_budget": "GUARD_ROUND_LIMIT",
    "request_budget": "GUARD_ROUND_LIMIT",
    "execution_budget": "GUARD_ROUND_LIMIT",
    "retry_budget": "GUARD_ROUND_LIMIT",
    "poll_budget": "GUARD_ROUND_LIMIT",
    "token_budget": "GUARD_TOKEN_LIMIT",
    "cost_budget": "GUARD_COST_LIMIT",
    "spend_cap": "GUARD_COST_LIMIT",
    "same_call": "GUARD_LOOP_DETECTED",
    "short_cycle": "GUARD_LOOP_DETECTED",
    "no_progress": "GUARD_LOOP_DETECTED",
    "repeated_output": "GUARD_LOOP_DETECTED",
    "near_duplicate": "GUARD_LOOP_DETECTED",
    "missing_operation_key": "GUARD_LEDGER",
    "operation_conflict": "GUARD_LEDGER",
    "unknown_commit": "GUARD_LEDGER",
    "bad_result": "GUARD_BAD_INPUT",
    "invalid_evidence": "GUARD_BAD_INPUT",
    "executor_error": "GUARD_BAD_INPUT",
    "fatal": "GUARD_TOOL_FAILED",
    "precondition": "GUARD_TOOL_FAILED",
    "operator_stop": "GUARD_STOPPED",
    "agent_stop": "GUARD_STOPPED",
    "agent_paused": "GUARD_STOPPED",
}
REASONS = tuple(REASON_CODES)

# Stops by a person or an agent (operator_stop, agent_stop, agent_paused): not the guard's.
GUARD_STOPPED = "GUARD_STOPPED"
# A breaker trip is a stop for a reason whose code is not GUARD_STOPPED: the guard stopped the
# task. COMPLETED and goal_unverified carry no code. The dashboard, the daily report, the
# metrics and the advisor all count trips by this set (agents.selectors.breaker_trips).
TRIP_REASONS = frozenset(
    reason for reason, code in REASON_CODES.items() if code and code != GUARD_STOPPED
)
TRIP_CODES: tuple[str, ...] = tuple(sorted({REASON_CODES[reason] or "" for reason in TRIP_REASONS}))


def is_trip(reason: str | None) -> bool:
    return reason in TRIP_REASONS


BLOCK_CODE = "DUPLICATE_TOOL_CALL_BLOCKED"


# -- the task as the core sees it ------------------------------------------------------------


@dataclass
class WindowEntry:
    """One step since the last progress: its fingerprint, tool and canonical args text.

    The args text and a short quote of the result are kept only for the optional
    near-duplicate check, which scores the args and names the result in its nudge.
    """

    fingerprint: str
    tool: str
    args: str = ""
    result: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"fp": self.fingerprint, "tool": self.tool, "args": self.args}
        if self.result:
            out["result"] = self.result
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, str]) -> WindowEntry:
        return cls(
            fingerprint=raw["fp"],
            tool=raw.get("tool", ""),
            args=raw.get("args", ""),
            result=raw.get("result", ""),
        )


@dataclass
class TaskState:
    """A mutable snapshot of one task row. Core functions change it in place."""

    state: str
    phase: int
    limits: Limits
    deadline_at: datetime
    reason: str | None = None
    model_calls: int = 0
    tool_requests: int = 0
    tool_executions: int = 0
    retries: int = 0
    polls: int = 0
    tokens_used: int = 0
    tokens_reserved: int = 0
    cost_spent: Decimal = Decimal("0")
    cost_reserved: Decimal = Decimal("0")
    revision: int = 0
    stagnant: int = 0
    window: list[WindowEntry] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # fingerprints already answered BLOCK
    pending: list[str] = field(default_factory=list)  # executed, result not reported yet
    # Fingerprints whose last result was PENDING: asking for one again without `job_id`
    # restarts the job instead of polling it, and draws on the poll budget all the same.
    awaited: list[str] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)  # last action signatures, newest last
    # With a similarity threshold: the last plans' texts (newest last) and the last reflection,
    # so repeated output can be judged by similarity as well as equality.
    plans: list[str] = field(default_factory=list)
    reflection: str = ""
    # Data hashes seen by the task, for novelty progress. The service keeps them in a table of
    # their own and loads only the one a result carries: whether *that* hash was seen is all
    # the core asks, so a decision costs the same after ten hashes or ten thousand.
    seen_hashes: list[str] = field(default_factory=list)
    milestones: list[str] = field(default_factory=list)
    report: dict[str, Any] | None = None
    # Not stored: what exactly was wrong with the input that stopped the task on this call
    # (the field of malformed evidence); the report built on the same call quotes it.
    stop_detail: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


# -- requests and outcomes -------------------------------------------------------------------


@dataclass
class AgentView:
    paused: bool = False
    daily_cap: Decimal | None = None
    spent_today: Decimal = Decimal("0")  # settled + reserved today, all tasks of the agent


@dataclass
class ModelCallRequest:
    """What a gate would reserve; see `model.model_estimate` for how a missing estimate is
    filled in before the gate sees it."""

    estimate_cost: Decimal = Decimal("0")
    estimate_tokens: int = 0


@dataclass
class UsageReport:
    reserved_cost: Decimal  # what the gate reserved for this model call
    actual_cost: Decimal
    tokens: int
    signature: str  # "" when the model asked for no tool call
    plan_text: str = ""  # canonical text of the tool calls asked for (similarity only)
    output_text: str = ""  # the model's text, for the reflection check (similarity only)
    reserved_tokens: int = 0  # the tokens the gate reserved for this model call


@dataclass
class OperationView:
    """The ledger row for a write's operation_key, as seen under its row lock."""

    state: str
    fingerprint: str
    lease_live: bool = False  # IN_FLIGHT and its lease has not expired
    result: Any = None


@dataclass
class ToolRequest:
    tool: str
    args: dict[str, Any]
    effect: str = READ
    operation_key: str | None = None
    job_id: str | None = None
    ignore_fields: list[str] = field(default_factory=list)  # from the tool policy
    near_duplicate_threshold: float | None = None  # tool policy overrides the task's limit
    similarity_provider: str = "lexical"  # the tool policy's: "lexical" | "semantic" | "embedding"
    # Embedding vectors by fingerprint, fetched before the task row was locked (embedding
    # provider only); a fingerprint without one is scored lexically.
    vectors: dict[str, Sequence[float]] = field(default_factory=dict)

    @cached_property
    def identity(self) -> tuple[str, str]:
        """(fingerprint, canonical args text), computed once for the core and the service."""
        return fingerprint(self.tool, self.args, self.ignore_fields)


@dataclass
class ToolCallView:
    """What the core needs of an EXECUTE'd call when its result arrives."""

    tool: str
    effect: str
    fingerprint: str
    args_text: str = ""
    job_id: str | None = None
    # False once the call's claim expired or was reconciled: it already left the pending set
    # (see `lifecycle.release_pending`), so a late result must not remove another call's entry.
    in_flight: bool = True
    # True when the write's claim is decided without this call: a verdict (or a later claim)
    # settled it after the call was released. Its late result then knows less than the ledger.
    claim_decided: bool = False


@dataclass
class ToolResult:
    kind: str
    data: Any = None
    data_hash: str | None = None
    wait_ms: int | None = None
    job_id: str | None = None
    attempts: int = 1
    evidence: Any = None  # raw, validated by the core
    code: str | None = None
    error: str | None = None
    # The tool policy's rules for what the data hash leaves out (see guard/novelty.py).
    rules: ResultRules = field(default_factory=ResultRules)


@dataclass
class Outcome:
    """What a core function decided.

    `stopped_now` is true when this call moved the task to a terminal state; the service then
    builds and stores the report (see `core.build_report`) and writes the stop event.
    """

    decision: str
    reason: str | None = None
    stopped_now: bool = False
    fingerprint: str | None = None
    # tool request
    claim: bool = False  # EXECUTE of a write: claim the ledger row IN_FLIGHT with a lease
    observation: dict[str, Any] | None = None  # BLOCK
    result: Any = None  # REUSE
    retry_after_ms: int | None = None  # WAIT
    # tool result: the ledger row's new state (None: unchanged) and its stored result
    operation_state: str | None = None
    operation_result: Any = None
    wait_ms: int | None = None  # CONTINUE after RETRYABLE / PENDING
    progress: bool = False
    trigger: str | None = None  # a guard rule that fired without stopping (e.g. same_call BLOCK)
    # What the loop rules counted at this call, stored on its trace row for the console: a
    # request's "repeat" (occurrences in the window, this one included), "rule"
    # (the loop rule it trips) and "cycle" (the period of the cycle it completes); a usage
    # report's "same_plan" (the repeated-output streak, when 2 or more). None: nothing to mark.
    marks: dict[str, int | str] | None = None


# -- errors ----------------------------------------------------------------------------------


class GuardError(Exception):
    """A request the core refuses outright (no state change), e.g. resuming a RUNNING task.

    `code` is a stable machine word ("TASK_RUNNING", "TASK_COMPLETED", "BAD_GRANT",
    "BAD_REASON") the service maps to its own domain error and HTTP status; `fields` names
    each bad input field with a short sentence, when the refusal is about fields (and
    DEADLINE_PASSED gives `seconds_needed` as a number).
    """

    def __init__(self, code: str, message: str, fields: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.fields = fields or {}


class LimitError(Exception):
    """Limits that fail validation; `fields` maps each bad field to a human sentence."""

    def __init__(self, fields: dict[str, str]):
        super().__init__("; ".join(f"{name}: {msg}" for name, msg in fields.items()))
        self.fields = fields
