"""The report page's result-field advice reads the window's calls, not the whole trace (issue 43).

It walked the tool calls newest first along the primary key until it had 5,000 with result
keys, filtered by `created_at::date`, which no index serves: on a history whose results carry
no data it walked every call ever made (5 million rows in the growth bench's year). The
window is now a range of the creation time, which the time's block-range index reads. This
test gives the trace many old calls without result keys and a few recent ones with them, and
reads from the plan how many call rows the advice looked at.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.models import LimitProfile, ToolCall
from agents.result_advice import result_field_proposals
from agents.services import tasks
from tests.api.plans import clone_rows, plans_of, rows_read, scans
from tests.conftest import allow_profiles
from tests.console.test_result_field_advice import read

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("on_postgres")]

OLD_CALLS = 40000


def test_the_advice_reads_the_windows_calls_only(agent):
    LimitProfile.objects.update_or_create(name="novelty", defaults={"progress_mode": "novelty"})
    allow_profiles(agent.name, "novelty")
    task_id = tasks.task_create(agent=agent, goal="Total of invoice 7", profile="novelty").pk
    read(agent, task_id, 0)
    template = ToolCall.objects.get(task_id=task_id)
    old = timezone.now() - timedelta(days=200)
    ToolCall.objects.filter(pk=template.pk).update(created_at=old, result_keys=None)
    # A year's data-less results: copies of the call, older than any report window.
    made = {"seq": "100 + n", "created_at": "%s + n * interval '1 second'", "result_keys": "NULL"}
    clone_rows(ToolCall, template.pk, 1, OLD_CALLS, made, params=(old,), analyze=False)
    for step in range(1, 4):  # this week's stamped answers, appended after the history
        read(agent, task_id, step)
    with connection.cursor() as cursor:
        # What autovacuum does (the index is `autosummarize`), here inside the test's transaction.
        cursor.execute("SELECT brin_summarize_new_values('trace_tc_created_brin')")
        cursor.execute("ANALYZE agents_toolcall")

    found: list = []
    plans = plans_of(lambda: found.extend(result_field_proposals(days=7)), analyze=True)

    assert [(p.tool, p.keys) for p in found] == [("search", ["replica"])]
    call_scans = [scan for plan in plans for scan in scans(plan, "agents_toolcall")]
    assert call_scans
    read_rows = [(scan["Node Type"], rows_read(scan)) for scan in call_scans]
    # One block range of old calls shares its pages with the new ones: at most a few thousand.
    assert sum(rows for _, rows in read_rows) <= OLD_CALLS // 10, read_rows
