"""Folding the task table's state deltas (`TaskStateDelta`) into one row a state.

The triggers append a row for every change of a task's state, so the rows between two folds
are the changes since the last one; the rollup job folds them every ROLLUP_INTERVAL_SECONDS,
which keeps the counts' read at a few rows whatever the history holds.
"""

from __future__ import annotations

from collections import Counter

from django.db import connection, transaction

from agents.models import TaskStateDelta


def state_counts_compact() -> int:
    """Replace the deltas with their sums, a row a state; the rows folded.

    One DELETE ... RETURNING takes exactly the rows it removes: a delta a concurrent
    transaction appends is not in its snapshot and stays, so nothing is lost or counted twice,
    and nobody waits (the deleted rows are never updated by anyone else)."""
    table = connection.ops.quote_name(TaskStateDelta._meta.db_table)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table} RETURNING state, n")  # noqa: S608 (our table)
        folded = cursor.fetchall()
        sums: Counter[str] = Counter()
        for state, n in folded:
            sums[state] += n
        TaskStateDelta.objects.bulk_create(
            TaskStateDelta(state=state, n=n) for state, n in sorted(sums.items()) if n
        )
    return len(folded)
