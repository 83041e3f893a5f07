"""The detection window: what the loop rules of the tool gate look at (docs/DESIGN.md section 4).

The window holds the steps since the last progress: an executed call joins it when its result
arrives (then it is known whether it made progress), a reused committed write joins it at once.
Until then it is pending, and the loop rules count it all the same: an agent that never reports
must not repeat a call, or go round a cycle, for free.
Progress clears it (and the BLOCK markers that belong to it) before the step that made it
joins. A status poll never meets the repetition rules, and a BLOCKed or stopped request never
joins the window: nothing ran.

These functions are the rules themselves. The tool gate decides with them and stores what they
counted on the request's trace row (`tool.request_marks`); the console's timeline shows it.
"""

from __future__ import annotations

from agents.guard.terms import TaskState, WindowEntry

SAME_CALL = "same_call"
SHORT_CYCLE = "short_cycle"


def is_poll(job_id: str | None) -> bool:
    """A status poll: asking again is the point, so the repetition rules do not apply (the
    poll budget and the deadline bound it instead)."""
    return bool(job_id)


def window_count(task: TaskState, fp: str) -> int:
    """How often `fp` was done since the last progress, counting calls still in flight.

    An executed call joins the window when its result arrives; until then it is pending. Both
    count, or an agent that never reports could repeat a read up to the execution budget.
    """
    done = sum(1 for entry in task.window if entry.fingerprint == fp)
    return done + task.pending.count(fp)


def requested(task: TaskState) -> list[str]:
    """The window's fingerprints in the order their requests came: the steps whose results
    arrived, then the calls still in flight (kept in request order). An agent that calls one
    tool at a time gets its results in that order too; an A-B-A-B whose results never arrive
    is still a cycle."""
    return [entry.fingerprint for entry in task.window] + task.pending


def cycle_period(task: TaskState, fp: str) -> int:
    """The period p (2 <= p <= max_cycle_period) of the sequence `fp` would repeat for the
    second time in a row, or 0 when it completes none. The sequence is `requested`, results
    arrived or not.

    At least two distinct fingerprints are required: A A A A is same_call's business.
    """
    seq = [*requested(task), fp]
    for period in range(2, task.limits.max_cycle_period + 1):
        if len(seq) < 2 * period:
            break
        tail = seq[-period:]
        if tail == seq[-2 * period : -period] and len(set(tail)) >= 2:
            return period
    return 0


def repetition(task: TaskState, fp: str) -> str | None:
    """The exact loop rule a (non-poll) request for `fp` trips, checked in the gate's order:
    same_call (step 8), then short_cycle (step 9); None when neither does."""
    if window_count(task, fp) >= task.limits.max_same_call:
        return SAME_CALL
    if cycle_period(task, fp):
        return SHORT_CYCLE
    return None


def join_window(task: TaskState, entry: WindowEntry, *, progress: bool) -> None:
    """A step joins the window. Progress clears it first, and the BLOCK markers with it: after
    progress, a call that was nudged before is a fresh call again and earns a fresh nudge."""
    if progress:
        task.window.clear()
        task.blocked.clear()
    task.window.append(entry)
