"""Racing result reports for one EXECUTE'd write: one is recorded, the others are refused.

The result path locks the task row and the call row in one statement; a report that waited
for the lock must read the call as the first report left it (reported), not as it was when
its statement started."""

from __future__ import annotations

from collections import Counter
from functools import partial

import pytest

from agents.guard import terms
from agents.models import Event, Task, ToolCall
from ledger.models import Operation
from tests.live import race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]

REPORTS = 8


def test_racing_result_reports_for_one_call_record_exactly_one(make_agent, api_for):
    _, token = make_agent("reporter", namespace="ns-report")
    api = api_for(token)
    task_id = api.post("tasks", {"goal": "send the invoices"})[1]["id"]

    for n in range(3):
        key = f"invoice-{n}"
        body = {"tool": "send_invoice", "args": {"n": n}, "effect": "write",
                "operation_key": key}  # fmt: skip
        status, asked = api.post(f"tasks/{task_id}/tool-calls", body)
        assert (status, asked["decision"]) == (200, terms.EXECUTE)
        result = {"kind": "SUCCESS", "data": {"sent": n},
                  "evidence": {"revision": n + 1, "done": False, "committed": True}}  # fmt: skip
        path = f"tasks/{task_id}/tool-calls/{asked['tool_call']}/result"

        answers = race([partial(api.post, path, result) for _ in range(REPORTS)])

        statuses = Counter(status for status, _ in answers)
        assert statuses == {200: 1, 409: REPORTS - 1}, answers
        refused = [a for status, a in answers if status == 409]
        assert {a["error"]["code"] for a in refused} == {"RESULT_ALREADY_REPORTED"}, refused
        operation = Operation.objects.get(namespace="ns-report", operation_key=key)
        assert (operation.state, operation.tool_call.pk) == (terms.OP_COMMITTED, asked["tool_call"])

    task = Task.objects.get(pk=task_id)
    assert (task.state, task.tool_executions, task.revision, task.pending) == (
        terms.RUNNING, 3, 3, []
    )  # fmt: skip
    assert ToolCall.objects.filter(task=task, reported_at__isnull=False).count() == 3
    assert not Event.objects.filter(task=task, kind="late_result").exists()
