"""Reconcilers: a team's HTTP endpoint that knows whether an operation of its tool committed.

A tool policy with a `reconcile_url` registers one. For an UNKNOWN operation of that tool the
endpoint is sent

    POST <reconcile_url>   {"operation_key", "namespace", "tool", "args"}

and answers `{"state": "committed" | "not_committed" | "unknown", "result"?: ...}`. A definite
answer goes through `operation_reconcile` as an automatic reconciliation (actor
`reconciler:<tool>`), the same road an operator's verdict takes. Anything else (a timeout, an
error status, a body that is not such an answer, "unknown") is no answer: the check is tried
again, a bounded number of times, and then the operation stays UNKNOWN for a human.

`Operation.reconcile_checks` counts the checks of the current UNKNOWN episode (the lease sweep
resets it). Each check claims the next number with a conditional update, so a check enqueued
twice, or retried by a worker that lost its message, never goes past the bound.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings
from django.db.models import F
from django.utils import timezone

from agents.errors import Conflict, NotFound
from agents.guard import terms
from agents.models import Event, EventKind, ToolPolicy
from ledger.models import Operation
from ledger.services import operation_reconcile

log = logging.getLogger("loopwarden.jobs")

ANSWERS = {"committed": terms.OP_COMMITTED, "not_committed": terms.NOT_COMMITTED}


class NoAnswer(Exception):
    """The reconciler gave no definite answer this time."""


@dataclass
class CheckOutcome:
    operation_id: int
    verdict: str | None  # COMMITTED / NOT_COMMITTED once applied, None when nothing changed
    detail: str = ""


def operations_to_check(*, limit: int = 200) -> list[int]:
    """UNKNOWN operations of tools with a reconciler that no check has looked at yet."""
    tools = ToolPolicy.objects.exclude(reconcile_url="").values("tool")
    return list(
        Operation.objects.filter(state=terms.UNKNOWN, reconcile_checks=0, tool__in=tools)
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )


def operation_check(*, operation_id: int, attempt: int) -> CheckOutcome:
    """Ask the tool's reconciler about one UNKNOWN operation: check number `attempt + 1`.

    Claims the check with a conditional update (`reconcile_checks` equals `attempt` and is
    below the bound, the operation still UNKNOWN); an unclaimed check does nothing. The HTTP
    call runs outside any transaction. Raises NoAnswer when the check may be tried again.
    """
    now = timezone.now()
    operation = Operation.objects.filter(pk=operation_id).first()
    if operation is None:
        return CheckOutcome(operation_id, None, "not claimed")
    # The check is claimed for the episode read here (`attempts`, the row's claim): its answer
    # is applied only to that episode, never to a later claim of the key (see below).
    claimed = Operation.objects.filter(
        pk=operation_id,
        state=terms.UNKNOWN,
        attempts=operation.attempts,
        reconcile_checks=attempt,
        reconcile_checks__lt=settings.RECONCILE_MAX_CHECKS,
    ).update(reconcile_checks=F("reconcile_checks") + 1, updated_at=now)
    if claimed != 1:
        return CheckOutcome(operation_id, None, "not claimed")
    policy = ToolPolicy.objects.filter(tool=operation.tool).exclude(reconcile_url="").first()
    if policy is None:  # the policy lost its URL since the check was queued
        return CheckOutcome(operation_id, None, "no reconciler")
    answer = ask_reconciler(policy.reconcile_url, operation)
    verdict = ANSWERS[answer["state"]]
    try:
        operation_reconcile(
            operation_id=operation.pk,
            verdict=verdict,
            note=f"The reconciler of {operation.tool} answered {answer['state']}.",
            actor=f"reconciler:{operation.tool}"[:150],
            result=answer.get("result") if verdict == terms.OP_COMMITTED else None,
            evidence={"reconcile_url": policy.reconcile_url, "answer": answer,
                      "check": attempt + 1},
            automatic=True,
            # The answer speaks of the episode it was asked about: while it came, an operator
            # may have settled that one and the key run again into a new UNKNOWN episode.
            claim=operation.attempts,
        )  # fmt: skip
    except (Conflict, NotFound) as exc:  # a human, or a late result, settled it meanwhile
        return CheckOutcome(operation_id, None, str(exc))
    log.info(json.dumps({"event": "operation_reconciled", "operation": operation.pk,
                         "operation_key": operation.operation_key, "tool": operation.tool,
                         "verdict": verdict, "actor": f"reconciler:{operation.tool}",
                         "check": attempt + 1}))  # fmt: skip
    return CheckOutcome(operation_id, verdict)


def ask_reconciler(url: str, operation: Operation) -> dict[str, Any]:
    """POST the operation to the reconciler; a definite answer or NoAnswer."""
    body = {
        "operation_key": operation.operation_key,
        "namespace": operation.namespace,
        "tool": operation.tool,
        "args": operation.args,
    }
    try:
        response = httpx.post(
            url,
            json=body,
            timeout=settings.RECONCILE_TIMEOUT_SECONDS,
            headers={"User-Agent": "loopwarden-reconciler/1"},
        )
        response.raise_for_status()
        answer = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise NoAnswer(f"{type(exc).__name__}: {exc}") from None
    state = answer.get("state") if isinstance(answer, dict) else None
    state = state.strip().lower() if isinstance(state, str) else state
    if state not in ANSWERS:
        raise NoAnswer(f"answered {str(answer)[:200]}")
    return {**answer, "state": state}


def operation_check_gave_up(*, operation_id: int, error: str) -> None:
    """The bounded checks are spent without an answer: say so on the operation's trail."""
    operation = Operation.objects.select_related("task").filter(pk=operation_id).first()
    if operation is None or operation.state != terms.UNKNOWN:
        return
    Event.objects.create(
        task_id=operation.task_id, agent_id=operation.task.agent_id, operation=operation,
        kind=EventKind.RECONCILE_NO_ANSWER, actor=f"reconciler:{operation.tool}"[:150],
        reason=error[:2000],
        detail={"operation_key": operation.operation_key, "checks": operation.reconcile_checks},
    )  # fmt: skip
    log.warning(json.dumps({"event": "reconcile_no_answer", "operation": operation_id,
                            "operation_key": operation.operation_key, "tool": operation.tool,
                            "checks": operation.reconcile_checks, "error": error}))  # fmt: skip
