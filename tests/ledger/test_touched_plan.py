"""The ledger rows a task touched are read through indexes, not over the whole ledger (issue 43).

`operations_touched` (the stop report, the finish, the resume's check, the task page) matched
`id IN (the calls' operation ids) OR task = t`: a subquery in an OR is a filter over every
ledger row (35 ms at 50,000 rows in the growth bench). It is now `id IN (a UNION ALL b)`, a
semi-join through the primary key. The console's search by an operation key read the whole
ledger too (no index on the key alone); it now probes the unique (namespace, key) index once
per namespace. These tests give the ledger many rows and read from the plans how many ledger
rows each read looked at.
"""

from __future__ import annotations

import pytest

from agents.guard import terms
from agents.services import runner, tasks
from console import queries
from ledger.models import Operation
from ledger.selectors import operations_of, operations_touched
from tests.api.plans import clone_operation, plans_of, rows_read, scans

pytestmark = [pytest.mark.django_db, pytest.mark.postgres, pytest.mark.usefixtures("on_postgres")]

ROWS = 20000


@pytest.fixture
def crowded_ledger(agent_row):
    """A task with one claimed write, and another task with ROWS more ledger rows."""
    task = tasks.task_create(agent=agent_row, goal="send the invoice")
    runner.tool_call_request(task_id=task.pk, agent=agent_row, tool="send_invoice", args={"n": 1},
                             effect=terms.WRITE, operation_key="invoice-1")  # fmt: skip
    other = tasks.task_create(agent=agent_row, goal="send every other invoice")
    runner.tool_call_request(task_id=other.pk, agent=agent_row, tool="send_invoice", args={"n": 2},
                             effect=terms.WRITE, operation_key="other")  # fmt: skip
    clone_operation(Operation.objects.get(operation_key="other"), 1, ROWS)
    return task


def ledger_rows_read(plans: list[dict]) -> list[tuple]:
    found = [scan for plan in plans for scan in scans(plan, "ledger_operation")]
    assert found
    return [(scan["Node Type"], scan.get("Index Name"), rows_read(scan)) for scan in found]


def test_the_rows_a_task_touched_are_read_by_index(crowded_ledger):
    found: list = []
    plans = plans_of(lambda: found.extend(operations_of(crowded_ledger)), analyze=True)

    assert found == [{"key": "invoice-1", "state": terms.IN_FLIGHT}]
    read = ledger_rows_read(plans)
    assert sum(rows for *_, rows in read) <= 10, read
    assert list(operations_touched(crowded_ledger).values_list("operation_key", flat=True)) == [
        "invoice-1"
    ]


def test_a_search_by_operation_key_reads_the_keys_rows_only(crowded_ledger):
    found: list = []
    plans = plans_of(
        lambda: found.extend(queries.dashboard_tasks(q="invoice-1")[:50]), analyze=True
    )

    assert [task.pk for task in found] == [crowded_ledger.pk]
    read = ledger_rows_read(plans)
    assert sum(rows for *_, rows in read) <= 10, read
    # An index scan on the key alone walks the whole (namespace, key) index, and the plan counts
    # only the rows it kept: the index's leading column must be in the condition.
    by_key = [scan for plan in plans for scan in scans(plan, "ledger_operation")
              if scan.get("Index Name") == "operation_key_unique"]  # fmt: skip
    assert by_key
    assert all("namespace" in scan["Index Cond"] for scan in by_key), by_key
