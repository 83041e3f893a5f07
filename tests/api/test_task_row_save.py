"""`agents.taskrow.save_task` writes the columns a decision changed and only those: a JSON
column changed in place after the lock is written, one left as it was is not (the goal, the
limits and the window would otherwise be rewritten on every decision)."""

from __future__ import annotations

from decimal import Decimal

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from agents.models import Task
from agents.taskrow import _copied, lock_task, save_task


def _updates(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if q["sql"].startswith("UPDATE")]


def test_a_json_column_changed_in_place_is_written(make_task):
    task = make_task()
    with transaction.atomic():
        locked = lock_task(task.pk)
        locked.window.append({"fp": "f" * 64, "tool": "search", "args": "{}"})
        locked.limits["max_tool_calls"] = 7
        locked.pending.append("a-fingerprint")
        with CaptureQueriesContext(connection) as captured:
            save_task(locked)
    (update,) = _updates(captured)
    for column in ("window", "limits", "pending", "updated_at"):
        assert f'"{column}"' in update
    for column in ("goal", "blocked", "signatures", "model_calls"):
        assert f'"{column}"' not in update
    row = Task.objects.get(pk=task.pk)
    assert row.window[-1]["tool"] == "search"
    assert row.limits["max_tool_calls"] == 7
    assert row.pending == ["a-fingerprint"]


def test_nothing_changed_writes_nothing_and_a_second_change_is_seen(make_task):
    task = make_task()
    with transaction.atomic():
        locked = lock_task(task.pk)
        # Equal values in new objects (a dict's keys in another order too) are no change.
        locked.limits = dict(reversed(list(locked.limits.items())))
        locked.window = list(locked.window)
        with CaptureQueriesContext(connection) as captured:
            save_task(locked)
        assert _updates(captured) == []
        locked.model_calls += 1
        save_task(locked)
        # What was written is the new reference: changed in place again, it is written again.
        locked.blocked.append("x")
        with CaptureQueriesContext(connection) as captured:
            save_task(locked)
    (update,) = _updates(captured)
    assert '"blocked"' in update and '"model_calls"' not in update
    row = Task.objects.get(pk=task.pk)
    assert (row.model_calls, row.blocked) == (1, ["x"])


def test_a_value_outside_json_types_is_copied_too():
    """The snapshot of a JSON column is a copy a change in place cannot reach, also for a
    value code put there that marshal cannot write (a Decimal)."""
    value = {"costs": [Decimal("1.5")], "tags": ["a"]}
    copied = _copied(value)
    value["costs"].append(Decimal("2"))
    value["tags"].append("b")
    assert copied == {"costs": [Decimal("1.5")], "tags": ["a"]}
