"""`manage.py measure_render` prints the figure and leaves no data behind (no timing asserted)."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command

from agents.models import Agent, Task, ToolCall


def test_it_prints_the_timings_and_rolls_back(db, devtools):
    out = StringIO()
    call_command("measure_render", rows=120, runs=1, stdout=out)
    text = out.getvalue()
    assert "task detail (120 trace rows)" in text
    assert "task detail with 120 trace rows: median" in text
    assert not Task.objects.exists()
    assert not ToolCall.objects.exists()
    assert not Agent.objects.exists()
