"""What each decision answers, and the answer kept for a request's `request_id`.

A decision request may carry a `request_id`. Its answer is kept with the task, in the
decision's transaction, so a repeat of the request (a client resending one whose answer it
lost: a dropped connection, a read timeout, a 503 after the commit) is answered the first
answer, with nothing counted. The kept answer is read by the decision's lock statement
(`agents.taskrow.ANSWER_PROBE`, `lock_task_and_call(request_id=...)`): a request with an id
costs no statement more than one without, only its answer's row, which on PostgreSQL goes with
the decision's closing writes. Ids are kept per task, for as long as the task is.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from django.db import IntegrityError

from agents.db.prepared import insert_row
from agents.errors import AlreadyAnswered, Conflict
from agents.guard import terms
from agents.models import ModelCall, RequestAnswer, Task, ToolCall


def _plain(value: Any) -> Any:
    """A request's value JSON does not know (a dataclass, a Decimal) as JSON can say it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_plain).encode


@dataclass(frozen=True)
class Asked:
    """A decision request that carries a request id: the id and what it asked (`digest`)."""

    request_id: str
    digest: str


def asked(task: Task, request_id: str, kind: str, *what: Any) -> Asked | None:
    """Under the task's lock, before anything is decided: None for a request without an id;
    else raise `AlreadyAnswered` with the answer kept for the id, or 409 REQUEST_ID_REUSED
    when the id was given to another request of the task (an endpoint, a path or a body that
    differs: answering it this one's answer would say something it was never told, such as
    EXECUTE for another write). `kind` names the endpoint, `what` the path ids and the body."""
    if not request_id:
        return None
    digest = hashlib.sha256(_encode([kind, *what]).encode()).hexdigest()
    kept_id = getattr(task, "answer_kept", None)
    if kept_id is None:
        return Asked(request_id, digest)
    kept = RequestAnswer.objects.get(pk=kept_id)
    if kept.digest != digest:
        raise Conflict(
            "This request_id was given to another request of the task; each request needs an "
            "id of its own (the same id only to send the same request again).",
            code="REQUEST_ID_REUSED",
            fields={"request_id": "used by another request"},
        )
    answer = kept.answer
    if kept.call_seq is not None:
        answer[kind] = _CALLS[kind].objects.get(task=task, seq=kept.call_seq).pk
    raise AlreadyAnswered(answer)


# The endpoints whose answer names the trace row they wrote, by the key it is named under.
_CALLS: dict[str, type[ModelCall] | type[ToolCall]] = {
    "model_call": ModelCall,
    "tool_call": ToolCall,
}


def keep(
    task: Task,
    request: Asked | None,
    answer: dict,
    call: ModelCall | ToolCall | None = None,
) -> None:
    """Keep `answer` for the request's id, in the decision's transaction (nothing without
    one); `call`, the trace row the decision wrote, whose id the answer names."""
    if request is not None:
        insert_row(
            RequestAnswer(
                task=task, request_id=request.request_id, digest=request.digest, answer=answer,
                call_seq=call.seq if call is not None else None,
            )
        )  # fmt: skip


P = ParamSpec("P")
R = TypeVar("R")

# What a repeat racing its first send can be answered before it reads the first's answer: its
# lock waited for the first, whose answer it reads as of its statement's start (none yet), but
# the call row the first settled it reads as it is now.
_RACED_CODES = frozenset({"USAGE_ALREADY_REPORTED", "RESULT_ALREADY_REPORTED"})


def answered_once(service: Callable[P, R]) -> Callable[P, R]:
    """A decision service that takes a `request_id`: a repeat sent while the first was being
    decided waits for the task lock, and may then decide again (its insert of the answer then
    fails on the unique id, rolling it all back) or find its call settled; either way it is
    decided once more, and that lock reads the first's answer."""

    @functools.wraps(service)
    def decide(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return service(*args, **kwargs)
        except IntegrityError as exc:
            if not kwargs.get("request_id") or not _same_request_id(exc):
                raise
        except Conflict as exc:
            if not kwargs.get("request_id") or exc.code not in _RACED_CODES:
                raise
        return service(*args, **kwargs)

    return decide


def _same_request_id(exc: IntegrityError) -> bool:
    text = str(exc)
    return "request_answer_unique" in text or RequestAnswer._meta.db_table in text


# -- the answers ---------------------------------------------------------------------------------


def stop_answer(task: Task, **extra: Any) -> dict:
    return {"decision": terms.STOP, "state": task.state, "reason": task.reason or None,
            "report": task.report, **extra}  # fmt: skip


def model_call_answer(task: Task, call: ModelCall, outcome: terms.Outcome) -> dict:
    if outcome.decision == terms.ALLOW:
        return {"decision": terms.ALLOW, "model_call": call.pk, "round": call.round}
    return stop_answer(task, model_call=call.pk)


def usage_answer(task: Task, outcome: terms.Outcome) -> dict:
    if outcome.decision == terms.STOP:
        return stop_answer(task)
    return {"decision": outcome.decision}


def tool_call_answer(task: Task, call: ToolCall, outcome: terms.Outcome) -> dict:
    answer: dict[str, Any] = {"decision": outcome.decision, "tool_call": call.pk,
                              "fingerprint": call.fingerprint or None}  # fmt: skip
    if outcome.decision == terms.EXECUTE:
        lease = call.lease_expires_at
        answer["lease_expires_at"] = lease.isoformat() if lease else None
    elif outcome.decision == terms.REUSE:
        answer["result"] = outcome.result
    elif outcome.decision == terms.BLOCK:
        answer["reason"] = outcome.reason
        answer["observation"] = outcome.observation
    elif outcome.decision == terms.WAIT:
        answer["retry_after_ms"] = outcome.retry_after_ms
    else:
        answer.update(stop_answer(task))
    return answer


def result_answer(task: Task, outcome: terms.Outcome) -> dict:
    if outcome.decision == terms.STOP:
        return stop_answer(task)
    answer: dict[str, Any] = {"decision": outcome.decision, "revision": task.revision}
    if outcome.wait_ms is not None:
        answer["wait_ms"] = outcome.wait_ms
    return answer
