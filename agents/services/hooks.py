"""Side effects after a decision: structured decision logs and, on commit, notifications.

Kept out of the rules: nothing here decides anything.
"""

from __future__ import annotations

import json
import logging

from agents.guard import types as g

log = logging.getLogger("loopwarden.decisions")


def decision_logged(task, event: str, outcome: g.Outcome, *, model_call=None, tool_call=None):
    """One JSON line per decision (and per guard trigger)."""
    if not log.isEnabledFor(logging.INFO):
        return
    line = {
        "event": event,
        "task": str(task.pk),
        "agent": task.agent_id,
        "phase": task.phase,
        "decision": outcome.decision,
        "reason": outcome.reason or (task.reason if outcome.decision == g.STOP else None),
        "state": task.state,
    }
    if model_call is not None:
        line.update(round=model_call.round, model=model_call.model,
                    tokens=(model_call.prompt_tokens or 0) + (model_call.completion_tokens or 0))
    if tool_call is not None:
        line.update(tool=tool_call.tool, fingerprint=tool_call.fingerprint[:16],
                    operation_key=tool_call.operation_key or None,
                    duration_ms=tool_call.duration_ms, seq=tool_call.seq)
    log.info(json.dumps(line, default=str))


def task_stopped(task) -> None:
    """Called inside the stopping transaction. Notifications are enqueued on commit."""
    from django.db import transaction

    if task.state == g.NEEDS_HUMAN:
        task_id, phase = str(task.pk), task.phase

        def enqueue() -> None:
            try:
                from agents.tasks import notify_needs_human
            except ImportError:  # background jobs not installed
                return
            notify_needs_human.delay(task_id, phase)

        transaction.on_commit(enqueue)
