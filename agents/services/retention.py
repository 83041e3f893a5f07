"""Retention (docs/DESIGN.md section 8): the trace of tasks that ended long ago is removed.

What goes, for a task that ended before the cutoff: its model and tool calls, its seen data
hashes, the answers kept for its request ids, and its events except people's actions (the
audit log, `selectors.PEOPLES_ACTIONS`) and its stops (one per phase: the breaker trips
count them). What stays: the task row (counters, limits, stop report), its phases (each
phase's report), the ledger and its reconciliations, notifications, the daily rollups.

A task that touched a ledger row nobody has settled keeps its trace until it is reconciled:
the reconcile and the resume find the task's calls through it.

Rows go in batches of `BATCH_ROWS`, one short transaction each, oldest ended tasks first.
Only rows created before the cutoff are removed, so a task resumed while it is being pruned
keeps everything its new phase writes. No batch touches a task row; the mark
(`Task.trace_pruned_at`) is one conditional update of ended tasks, under a lock timeout, so it
gives up rather than make a decision wait.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection, models, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from agents.guard import terms
from agents.models import Event, ModelCall, RequestAnswer, SeenHash, Task, ToolCall
from agents.selectors import PEOPLES_ACTIONS
from ledger.selectors import touches_unresolved

# The fewest days retention keeps: the rollup job rebuilds yesterday from the trace.
MIN_DAYS = 2
BATCH_ROWS = 5000  # rows one transaction deletes
TASKS_PER_ROUND = 1000  # tasks whose rows one round deletes, then marks
# Task rows one mark statement updates: the mark is the only lock a decision could wait on (a
# task resumed while it is marked); 200 at once held them 81 ms on a busy 2-core machine.
TASKS_PER_MARK = 25
LOCK_TIMEOUT_MS = 50  # the longest a prune statement waits for a lock (PostgreSQL)

# Stops stay with the audit log: the breaker trips (`selectors.breaker_trips`) count them.
_KEPT_EVENTS = PEOPLES_ACTIONS | Q(kind__in=("task_stopped", "task_completed"))


@dataclass
class PruneResult:
    """What a prune removed (or, in a dry run, would remove): tasks and rows per table."""

    cutoff: datetime
    dry_run: bool = False
    tasks: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    longest_transaction_ms: float = 0.0  # the longest any batch held its row locks
    # The longest the mark held task rows (the only lock a decision could wait on: a task
    # resumed while it is marked).
    longest_mark_ms: float = 0.0

    def count(self, table: str, n: int) -> None:
        self.rows[table] = self.rows.get(table, 0) + n

    def as_dict(self) -> dict:
        return {"tasks": self.tasks, **self.rows}


def cutoff_of(days: int, now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(days=days)


def prunable_tasks(cutoff: datetime) -> models.QuerySet[Task]:
    """Tasks retention prunes at `cutoff`, oldest ended first (the `task_prunable` index)."""
    return (
        Task.objects.filter(
            ended_at__lt=cutoff,
            trace_pruned_at__isnull=True,
            state__in=sorted(terms.TERMINAL_STATES),
        )
        .exclude(touches_unresolved(OuterRef("pk")))
        .order_by("ended_at")
    )


def _pieces(ids: list, cutoff: datetime) -> list[tuple[str, models.QuerySet]]:
    """The rows of tasks `ids` that a prune removes, table by table, in a delete order the
    foreign keys accept (a tool call names its model call)."""
    old = Q(task_id__in=ids, created_at__lt=cutoff)
    return [
        ("tool_calls", ToolCall.objects.filter(old)),
        (
            "model_calls",
            # A call a newer tool call still names (a resumed task's) stays.
            ModelCall.objects.filter(old).exclude(
                Exists(ToolCall.objects.filter(model_call=OuterRef("pk")))
            ),
        ),
        ("seen_hashes", SeenHash.objects.filter(old)),
        ("request_answers", RequestAnswer.objects.filter(old)),
        ("events", Event.objects.filter(old).exclude(_KEPT_EVENTS)),
    ]


def trace_prune(
    *,
    days: int,
    now: datetime | None = None,
    dry_run: bool = False,
    max_tasks: int | None = None,
    batch_rows: int = BATCH_ROWS,
) -> PruneResult:
    """Remove the trace of the tasks that ended more than `days` days before `now` (at most
    `max_tasks` of them; the next run takes the rest). A dry run counts and changes nothing.

    Takes no task row lock while deleting: each batch deletes at most `batch_rows` rows of
    ended tasks in its own transaction. Marks the tasks afterwards (see the module docstring).
    """
    if days < MIN_DAYS:
        raise ValueError(f"retention keeps at least {MIN_DAYS} days")
    now = now or timezone.now()
    result = PruneResult(cutoff=cutoff_of(days, now), dry_run=dry_run)
    candidates = prunable_tasks(result.cutoff).values_list("pk", flat=True)
    if max_tasks is not None:
        candidates = candidates[:max_tasks]
    if dry_run:
        ids = list(candidates)
        result.tasks = len(ids)
        for start in range(0, len(ids), TASKS_PER_ROUND):
            for table, rows in _pieces(ids[start : start + TASKS_PER_ROUND], result.cutoff):
                result.count(table, rows.count())
        return result
    left = max_tasks
    while left is None or left > 0:
        size = TASKS_PER_ROUND if left is None else min(left, TASKS_PER_ROUND)
        ids = list(prunable_tasks(result.cutoff).values_list("pk", flat=True)[:size])
        if not ids:
            break
        prune_round(ids, cutoff=result.cutoff, now=now, result=result, batch_rows=batch_rows)
        if left is not None:
            left -= len(ids)
    return result


def prune_round(
    ids: list,
    *,
    cutoff: datetime,
    now: datetime,
    result: PruneResult,
    batch_rows: int = BATCH_ROWS,
) -> None:
    """Delete the old rows of tasks `ids`, batch by batch, then mark the tasks pruned."""
    if not ids:
        return
    for table, rows in _pieces(ids, cutoff):
        while True:
            deleted = _delete_batch(rows, batch_rows, result)
            result.count(table, deleted)
            if deleted < batch_rows:
                break
    for start in range(0, len(ids), TASKS_PER_MARK):
        with _short_transaction(result, mark=True):
            result.tasks += Task.objects.filter(
                pk__in=ids[start : start + TASKS_PER_MARK],
                ended_at__lt=cutoff,
                trace_pruned_at__isnull=True,
            ).update(trace_pruned_at=now)


def _delete_batch(rows: models.QuerySet, limit: int, result: PruneResult) -> int:
    """Delete up to `limit` of `rows` in one statement (no Django collector: what points at
    these rows is deleted before them or keeps them, see `_pieces`)."""
    model = rows.model
    sql, params = rows.values("pk")[:limit].query.sql_with_params()
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(model._meta.pk.column)
    with _short_transaction(result), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} WHERE {pk} IN ({sql})", params)
        return cursor.rowcount


class _short_transaction:
    """A transaction that waits at most `LOCK_TIMEOUT_MS` for a lock (PostgreSQL) and records
    how long it held its own in `result.longest_transaction_ms`."""

    def __init__(self, result: PruneResult, *, mark: bool = False) -> None:
        self.result = result
        self.mark = mark
        self.atomic = transaction.atomic()

    def __enter__(self) -> None:
        self.atomic.__enter__()
        self.started = time.perf_counter()
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_MS}ms'")

    def __exit__(self, *exc) -> None:
        self.atomic.__exit__(*exc)
        held = (time.perf_counter() - self.started) * 1000
        self.result.longest_transaction_ms = max(self.result.longest_transaction_ms, held)
        if self.mark:
            self.result.longest_mark_ms = max(self.result.longest_mark_ms, held)
