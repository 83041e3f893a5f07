"""The one road to a terminal state: every stop (a guard decision, an operator's or an agent's
stop, a sweep, a paused agent's next request) ends here.

`record_stop` stores the report, closes the phase, writes the stop event, saves the task row
and queues the operator's notification for when the transaction commits.

The notification is a Celery job (`agents.jobs.notify_needs_human`), and jobs sit above the
services (they call them), so this module does not import the job: it sends
`notification_due` on commit, and `agents.jobs` connects the enqueue to it (imported by
`AgentsConfig.ready`, so every process that can stop a task has the receiver).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime

from django.db import transaction
from django.dispatch import Signal

from agents.db.prepared import insert_row, update_rows
from agents.guard import core, terms
from agents.models import Event, EventKind, Phase, Task
from agents.taskrow import apply_state, save_task
from ledger.selectors import operations_of

jobs_log = logging.getLogger("loopwarden.jobs")

# Sent on commit of a stop an operator must hear about; keyword arguments task_id (str),
# phase (int), kind ("needs_human" / "spend_cap").
notification_due = Signal()


def record_stop(
    task: Task,
    state: terms.TaskState,
    now: datetime,
    *,
    actor: str,
    actor_user=None,
    note: str = "",
) -> None:
    """The task just became terminal (`state` is the core's answer): store the report once,
    close the phase, log the stop, save the row, and notify on commit when the stop needs it.

    Called inside the transaction that holds the task row lock. In a `decision_transaction`
    the phase's update, the event and the task row go to the database with the decision's
    other closing writes (`agents.db.prepared.writes_together`).
    """
    report = core.build_report(state, now, operations_of(task))
    apply_state(task, state)
    task.ended_at = now
    update_rows(
        Phase.objects.filter(task=task, number=task.phase),
        ended_at=now,
        end_state=task.state,
        end_reason=task.reason,
        report=report,
    )
    insert_row(
        Event(
            task=task,
            agent_id=task.agent_id,
            kind=EventKind.TASK_STOPPED
            if task.state != terms.COMPLETED
            else EventKind.TASK_COMPLETED,
            phase=task.phase,
            actor=actor,
            actor_user=actor_user,
            reason=note or task.reason,
            code=terms.REASON_CODES.get(task.reason) or "",
            detail={"state": task.state, "reason": task.reason},
        )
    )
    save_task(task)
    _notify_on_commit(task)


def notification_kind(task: Task) -> str | None:
    """Which stops an operator hears about: NEEDS_HUMAN, and a task the spend cap stopped.

    The spend cap does not pause the agent: the cap is per UTC day, so every further gate of
    that agent today stops its task anyway, and tomorrow it runs again without a human
    unpausing it. The operator is told so the cap can be raised if the work matters.
    """
    if task.state == terms.NEEDS_HUMAN:
        return "needs_human"
    if task.reason == "spend_cap":
        return "spend_cap"
    return None


def _notify_on_commit(task: Task) -> None:
    """Enqueued on commit, `robust`: a broker that is down is logged, never turned into an
    error of the request that stopped the task (that request has committed by then)."""
    kind = notification_kind(task)
    if kind is None:
        return
    task_id, phase = str(task.pk), task.phase

    def enqueue() -> None:
        try:
            notification_due.send(sender=Task, task_id=task_id, phase=phase, kind=kind)
        except Exception as exc:  # the broker is down or misconfigured
            jobs_log.error(json.dumps({
                "event": "notify_enqueue_failed", "task": task_id, "phase": phase,
                "kind": kind, "error": f"{type(exc).__name__}: {exc}",
            }))  # fmt: skip

    transaction.on_commit(enqueue, robust=True)
