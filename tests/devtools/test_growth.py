"""The growth phase of the bench at a tiny size, so its seeding and timing cannot rot."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Sum
from django.utils import timezone

from agents.models import DailyRollup, Event, ModelCall, Phase, Task, ToolCall
from devtools import growth
from ledger.models import Operation

pytestmark = pytest.mark.django_db


def test_it_seeds_ended_tasks_with_their_trace_spread_over_agents_days_and_states():
    seeded = growth.seed_history(60, newest_day=growth.NEWEST_DAY, oldest_day=growth.OLDEST_DAY)

    tasks = Task.objects.filter(agent__name__startswith="growth-")
    assert seeded.tasks == tasks.count() == 60
    assert not tasks.filter(ended_at=None).exists()
    trace = tasks.aggregate(n=Sum("trace_seq"))["n"]
    assert seeded.trace_rows == trace == ModelCall.objects.count() + ToolCall.objects.count()
    assert ModelCall.objects.count() == ToolCall.objects.count()
    assert Phase.objects.count() == Event.objects.filter(kind="task_stopped").count() == 60
    assert Operation.objects.count() == 15  # one task in four made a write
    assert len(set(tasks.values_list("state", flat=True))) > 1
    assert len(set(tasks.values_list("agent_id", flat=True))) > 1
    now = timezone.now()
    days = {(now.date() - t.date()).days for t in tasks.values_list("created_at", flat=True)}
    assert len(days) > 10 and min(days) >= growth.NEWEST_DAY
    assert max(days) <= growth.OLDEST_DAY
    first = ToolCall.objects.order_by("task_id", "seq").select_related("task").first()
    assert first.created_at - first.task.created_at < timedelta(minutes=5)
    assert DailyRollup.objects.aggregate(n=Sum("model_calls"))["n"] == trace // 2


def test_the_growth_command_prints_its_table(devtools):
    out = StringIO()

    call_command("bench_growth", growth_size=24, small_size=12, repeat=1, stdout=out,
                 stderr=StringIO())  # fmt: skip

    text = out.getvalue()
    assert "history of 12 then 24 ended tasks" in text
    items = ("dashboard", "task list API, deep cursor", "daily report CSV", "search",
             "rollup job", "lease sweep", "prune batch", "one decision")  # fmt: skip
    for item in items:
        assert item in text
