"""What the client hands to and gets from the application: decisions, tool reports, plans."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from loopwarden_client.errors import InvalidEvidence
from loopwarden_client.evidence import evidence_problem

JSON = dict[str, Any]

# Guard decisions (docs/DESIGN.md section 4) and the result kinds of a tool execution.
ALLOW, CONTINUE = "ALLOW", "CONTINUE"
STOP, WAIT, BLOCK, REUSE, EXECUTE = "STOP", "WAIT", "BLOCK", "REUSE", "EXECUTE"
SUCCESS, RETRYABLE, PENDING = "SUCCESS", "RETRYABLE", "PENDING"
PRECONDITION, FATAL, NO_RESULT = "PRECONDITION", "FATAL", "NO_RESULT"
COMPLETED = "COMPLETED"
READ, WRITE = "read", "write"
# Not the server's: the client answered the model itself (its arguments derive no operation
# key), and nothing was asked.
INVALID = "INVALID"


def drop_none(**fields: Any) -> JSON:
    """The fields that have a value: the API reads an absent field and a null alike."""
    return {key: value for key, value in fields.items() if value is not None}


def jsonable(value: Any) -> Any:
    """A JSON form of a tool's output, for the result report.

    The tool already ran, so its result must reach the server whatever it holds: a Decimal is
    sent as its exact text, a date or time in ISO 8601, a UUID as text, a pydantic model or
    dataclass-like object by its `model_dump()` or `dict()`, anything else by its repr (its
    type's name when the repr raises). A float JSON has no number for (NaN, Infinity,
    -Infinity) is sent as that name, as text: sent as is, the whole report would be refused.
    """
    try:
        return json.loads(json.dumps(value, default=_fallback), parse_constant=str)
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested past the limit
        return _text(value)


def _text(value: Any) -> str:
    """The last resort: a value's repr, or its type's name when even that raises (an int past
    Python's 4300 digits, an object whose repr needs what is gone, a tree past the recursion
    limit)."""
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 - the tool ran: its result is reported whatever it is
        return f"<{type(value).__qualname__} without a text form>"


def _fallback(value: Any) -> Any:
    if isinstance(value, Decimal | UUID):
        return str(value)
    if isinstance(value, date | time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, set | frozenset):
        return list(value)
    for dump in ("model_dump", "dict"):
        method = getattr(value, dump, None)
        if callable(method):
            try:
                return method()
            except Exception:  # noqa: BLE001 - a best effort at a JSON form
                break
    return _text(value)


def whole(number: Any) -> Any:
    """A finite float or Decimal count rounded up to an int; anything else as it is."""
    if isinstance(number, float | Decimal) and math.isfinite(number):
        return math.ceil(number)
    return number


MAX_ERROR = 2000  # characters of a result's `error` sent (a tool's exception, a handed-back one)


def _cut(text: str | None) -> str | None:
    """An error as long as a person reads: an exception that carries a whole response body
    would make the report too large to take (413), and a tool that ran must be reported."""
    if text is None or len(text) <= MAX_ERROR:
        return text
    return f"{text[:MAX_ERROR]}… ({len(text)} characters)"


def _str(text: Any) -> str | None:
    return None if text is None else text if isinstance(text, str) else _text(text)


def check_evidence(evidence: Mapping[str, Any] | None) -> None:
    """Refuse malformed evidence where it is written, before anything is sent: sent, it
    would stop the task (invalid_evidence)."""
    if evidence is not None and (problem := evidence_problem(evidence)) is not None:
        raise InvalidEvidence(problem)


@dataclass(frozen=True)
class ToolReport:
    """What a tool execution produced, as reported to the result endpoint.

    An `execute` function may return one of these, or plain data (meaning SUCCESS). Evidence
    (`{"revision", "done", "committed"?, "milestone"?}`) must come from the application's
    verifier, never from the model's text.
    """

    kind: str = SUCCESS
    data: Any = None
    evidence: Mapping[str, Any] | None = None
    wait_ms: int | None = None
    job_id: str | None = None
    attempts: int = 1
    code: str | None = None
    error: str | None = None
    data_hash: str | None = None

    def __post_init__(self) -> None:
        check_evidence(self.evidence)

    def result_fields(self) -> JSON:
        """The result endpoint's fields besides `kind`, as JSON (see `jsonable`). The tool ran,
        so the counts and texts go as the API takes them, however Python let them be written:
        a float wait or attempts rounded up to whole ones (a wait stays above zero), a job id,
        code or error that is no text (an int, an exception) as its text, an error past
        `MAX_ERROR` characters cut there."""
        return drop_none(
            data=jsonable(self.data),
            evidence=jsonable(dict(self.evidence)) if self.evidence is not None else None,
            wait_ms=whole(self.wait_ms),
            job_id=_str(self.job_id),
            attempts=whole(self.attempts),
            code=_str(self.code),
            error=_cut(_str(self.error)),
            data_hash=_str(self.data_hash),
        )

    def tool_message(self) -> JSON:
        """The tool message for the model; failures are shaped like the BLOCK observation."""
        if self.kind == SUCCESS:
            return {"success": True, "data": self.data}
        default = {
            RETRYABLE: "The tool failed temporarily.",
            PENDING: f"Job {self.job_id} is still running; poll it with job_id.",
            NO_RESULT: "The tool gave no usable result.",
        }.get(self.kind, f"The tool answered {self.kind}.")
        message: JSON = {
            "success": False,
            "code": self.code or self.kind,
            "retryable": self.kind in (RETRYABLE, PENDING),
            "message": self.error or default,
        }
        message.update(drop_none(data=self.data, job_id=self.job_id, wait_ms=self.wait_ms))
        return message


@dataclass
class Plan:
    """One planning step of the model: the tool calls it asked for, or that it is done.

    `tool_calls` items are `{"name", "args", "effect"?, "operation_key"?, "job_id"?, "id"?}`.
    `evidence` for `finish` must come from the verifier; tokens are the call's real usage.
    """

    tool_calls: list[JSON] = field(default_factory=list)
    done: bool = False
    evidence: JSON | None = None
    answer: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    output_text: str | None = None

    def __post_init__(self) -> None:
        check_evidence(self.evidence)


@dataclass
class ModelCall:
    """An allowed model call. Call `usage(...)` once the model answered."""

    task_id: str
    model_call: int
    round: int | None = None
    answer: JSON | None = None  # the usage report's answer, after the block exits
    reported_usage: JSON | None = field(default=None, init=False, repr=False)

    def usage(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        tool_calls: list[Mapping[str, Any]] | None = None,
        output_text: str | None = None,
    ) -> None:
        """Record the real usage; it is reported when the `with` block exits."""
        self.reported_usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "tool_calls": tool_calls,
            "output_text": output_text,
        }


@dataclass(frozen=True)
class ToolOutcome:
    """How one guarded tool call ended: the message for the model and what decided it.

    `decision` is the guard's answer (EXECUTE, REUSE, BLOCK, or WAIT when the wait ran out),
    or INVALID when an adapter answered the model itself (see `guard.Guard.tool`);
    `report` is set when this call's result finished the task (COMPLETED by evidence).
    """

    message: JSON
    decision: str
    executed: bool = False
    report: JSON | None = None
