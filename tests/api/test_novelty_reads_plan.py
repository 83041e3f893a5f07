"""In novelty mode a result's reads cost the same however long the task's trace is.

A result judged new keeps which of its top-level keys made it new, compared with an earlier
result: the same call's last, else the same tool's last (`runner._novelty_reads`, one
statement). Both are found by walking the task's calls back by seq; for a call, or a tool, the
task never had, that walk used to reach the task's first call: the novelty result on a
5,000-call task took 1.3x the time of one on a fresh task (`manage.py bench`). The walk now
stops `KEYS_LOOKBACK` trace rows back. These tests read, from the statement's plan, how many of
the task's calls it looked at, and what the comparison is when the earlier result is further
back than that.
"""

from __future__ import annotations

import pytest
from django.db import connection

from agents.guard import terms
from agents.guard.novelty import KEYS_LOOKBACK
from agents.models import ToolCall
from agents.services.runner import _NOVELTY_READS
from tests.api.plans import generic_plan, rows_read, scans

LONG = 3 * KEYS_LOOKBACK  # the long task's earlier calls, each with a result's key digests


def add_results(task, count, *, tool="fetch_page", first_seq=1):
    ToolCall.objects.bulk_create(
        ToolCall(task=task, seq=first_seq + n, phase=1, tool=tool, args={"page": n},
                 effect=terms.READ, fingerprint=f"{tool}-{n}", decision=terms.EXECUTE,
                 result_kind="SUCCESS", result_keys={"page": f"p{n}", "rows": "r"})
        for n in range(count)
    )  # fmt: skip


@pytest.mark.django_db
@pytest.mark.postgres
@pytest.mark.usefixtures("on_postgres")
@pytest.mark.parametrize("tool", ["fetch_page", "a_new_tool"], ids=["new call", "new tool"])
def test_a_new_calls_result_reads_at_most_the_lookback(make_task, tool):
    task = make_task(goal="A long task in novelty mode")
    add_results(task, LONG)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE agents_toolcall, agents_task, agents_seenhash")

    plan = generic_plan(*_NOVELTY_READS.compiled_sql(
        task=task.pk, hash="h" * 64, tool=tool, fingerprint="never-seen", before=LONG + 1,
        tool_again=tool, before_again=LONG + 1, after=LONG + 1 - KEYS_LOOKBACK,
        after_again=LONG + 1 - KEYS_LOOKBACK,
    ))  # fmt: skip

    read = sum(rows_read(scan) for scan in scans(plan, "agents_toolcall"))
    assert 0 < read <= 2 * KEYS_LOOKBACK


@pytest.mark.django_db
def test_an_earlier_result_beyond_the_lookback_is_not_the_one_compared(make_task, agent_api):
    """The same call's last result, once further back than the lookback, gives way to the same
    tool's last result within it; with none there, every key is new."""
    from agents.services import runner

    task = make_task(goal="A long task in novelty mode")
    add_results(task, KEYS_LOOKBACK + 2)
    old = ToolCall.objects.get(task=task, seq=1)  # fingerprint fetch_page-0, page p0
    call = ToolCall(task=task, seq=KEYS_LOOKBACK + 3, fingerprint=old.fingerprint,
                    tool="fetch_page")  # fmt: skip

    seen, keys = runner._novelty_reads(task, call, "h" * 64)
    other_tool = ToolCall(task=task, seq=KEYS_LOOKBACK + 3, fingerprint="x", tool="other")
    _, no_keys = runner._novelty_reads(task, other_tool, "h" * 64)

    last = ToolCall.objects.get(task=task, seq=KEYS_LOOKBACK + 2)
    assert (seen, keys, no_keys) == (False, last.result_keys, None)
