"""Side effects after a decision: metrics and structured decision logs (the notification a
stop sends is `agents.services.stops`).

Kept out of the rules: nothing here decides anything.
"""

from __future__ import annotations

import json
import logging

from agents import metrics
from agents.guard import terms
from agents.redaction import DEFAULT

log = logging.getLogger("loopwarden.decisions")
# One encoder for every line: `json.dumps(..., default=str)` builds a new one per call.
_encode = json.JSONEncoder(default=str).encode

# Every decision line carries these keys (null when they do not apply), so the lines can be
# loaded into a table without guessing at columns.
LINE_KEYS = (
    "event", "task", "run", "agent", "phase", "round", "tool", "fingerprint", "operation_key",
    "decision", "reason", "code", "state", "tokens", "duration_ms",
)  # fmt: skip


def decision_logged(
    task, event: str, outcome: terms.Outcome, *, model_call=None, tool_call=None, operation=None
) -> None:
    """Count the decision for Prometheus; log one JSON line per decision, and one more per
    guard trigger (a rule that fired).

    `run` names the task's phase ("<task>:<phase>"): counters survive a resume, runs do not.
    `round` is the model-call round the decision belongs to (for a model call, its own).
    """
    reason = outcome.reason or (task.reason if outcome.decision == terms.STOP else None)
    # A BLOCK carries no reason, only the rule that fired: count it under that rule.
    metrics.decision_counted(
        event, outcome.decision, reason or outcome.trigger, stopped=outcome.stopped_now
    )
    if not log.isEnabledFor(logging.INFO):
        return
    line = dict.fromkeys(LINE_KEYS)
    line.update(
        event=event,
        task=str(task.pk),
        run=f"{task.pk}:{task.phase}",
        agent=task.agent_id,
        phase=task.phase,
        round=task.model_calls or None,  # the model-call round in progress
        decision=outcome.decision,
        reason=reason,
        code=terms.REASON_CODES.get(reason) if reason else None,
        state=task.state,
    )
    if model_call is not None:
        tokens = (model_call.prompt_tokens or 0) + (model_call.completion_tokens or 0)
        line.update(round=model_call.round, model=model_call.model, seq=model_call.seq,
                    tokens=tokens if model_call.settled_at else None)  # fmt: skip
    if tool_call is not None:
        line.update(
            tool=tool_call.tool,
            fingerprint=tool_call.fingerprint or None,
            operation_key=_masked(tool_call.operation_key),
            duration_ms=tool_call.duration_ms,
            seq=tool_call.seq,
        )
    if operation is not None:
        line.update(tool=operation.tool, fingerprint=operation.fingerprint or None,
                    operation_key=_masked(operation.operation_key))  # fmt: skip
    log.info(_encode(line))
    # A trigger: a rule that fired without stopping (a BLOCK), or a stop of the guard's own (a
    # breaker trip, `terms.is_trip`): completing is not a trip, nor a stop by a person or by
    # the agent itself (GUARD_STOPPED), which the dashboard and the metrics don't count either.
    trigger = outcome.trigger or (
        outcome.reason if outcome.stopped_now and terms.is_trip(outcome.reason) else None
    )
    if trigger and terms.REASON_CODES.get(trigger):
        log.info(_encode({**line, "event": "guard_trigger", "trigger_of": event,
                      "reason": trigger, "code": terms.REASON_CODES.get(trigger)}))  # fmt: skip


def _masked(operation_key: str | None) -> str | None:
    """An operation key as the console shows it: an agent may derive one from a secret (a card
    number), and log lines travel further than the console (2 us a key)."""
    return DEFAULT.mask_text(operation_key) if operation_key else None
