"""Racing tool requests for one write key: exactly one EXECUTE, whichever workers answer."""

from __future__ import annotations

from collections import Counter
from functools import partial

import pytest

from agents.guard import terms
from agents.models import Task, ToolCall
from ledger.models import Operation
from tests.live import race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]

TASKS = 4
REQUESTS = 16


def race_for_the_key(api, task_ids: list[str], body: dict) -> int:
    """REQUESTS tool requests for one write key, spread over the tasks, released at once.

    Every answer must be 200, exactly one EXECUTE and the rest WAIT: nothing under the key is
    committed, so REUSE is impossible; one request claims it, everyone else waits. Returns the
    tool call that got EXECUTE.
    """
    answers = race(
        [partial(api.post, f"tasks/{task_ids[i % TASKS]}/tool-calls", body)
         for i in range(REQUESTS)]
    )  # fmt: skip

    assert [status for status, _ in answers] == [200] * REQUESTS, answers
    decisions = Counter(answer["decision"] for _, answer in answers)
    assert decisions == {terms.EXECUTE: 1, terms.WAIT: REQUESTS - 1}, answers
    return next(answer["tool_call"] for _, answer in answers if answer["decision"] == terms.EXECUTE)


def test_racing_requests_for_one_key_across_tasks_give_exactly_one_execute(make_agent, api_for):
    _, token = make_agent("racer", namespace="ns-race")
    api = api_for(token)
    task_ids = [api.post("tasks", {"goal": f"notify {i}"})[1]["id"] for i in range(TASKS)]

    for key in ("incident-42-first-notice", "incident-43-first-notice", "refund-7"):
        body = {"tool": "send_notice", "args": {"key": key}, "effect": "write",
                "operation_key": key}  # fmt: skip
        executed = race_for_the_key(api, task_ids, body)

        operation = Operation.objects.get(namespace="ns-race", operation_key=key)
        assert operation.state == terms.IN_FLIGHT
        assert operation.tool_call.pk == executed
        calls = ToolCall.objects.filter(operation_key=key)
        assert calls.count() == REQUESTS
        assert calls.filter(decision=terms.EXECUTE).count() == 1

    assert Operation.objects.filter(namespace="ns-race").count() == 3
    assert Operation.objects.filter(namespace="ns-race", state=terms.IN_FLIGHT).count() == 3
    tasks = Task.objects.filter(pk__in=task_ids)
    assert sum(t.tool_executions for t in tasks) == 3
    assert sum(t.tool_requests for t in tasks) == 3 * REQUESTS
    assert all(t.state == terms.RUNNING for t in tasks)


def test_racing_requests_for_a_not_committed_key_reclaim_it_exactly_once(make_agent, api_for):
    """The existing ledger row is claimed under its row lock: one re-execution, not four."""
    _, token = make_agent("retrier", namespace="ns-retry")
    api = api_for(token)
    task_ids = [api.post("tasks", {"goal": f"charge {i}"})[1]["id"] for i in range(TASKS)]

    for n, order in enumerate((7, 8, 9)):
        key = f"charge-order-{order}"
        body = {"tool": "charge", "args": {"order": order}, "effect": "write",
                "operation_key": key}  # fmt: skip
        owner = task_ids[n]  # one failed attempt per task: no task runs out of progress
        status, first = api.post(f"tasks/{owner}/tool-calls", body)
        assert (status, first["decision"]) == (200, terms.EXECUTE)
        # The provider proved the charge did not happen: the key may run again.
        failed = {"kind": "RETRYABLE", "wait_ms": 10,
                  "evidence": {"revision": 0, "done": False, "committed": False}}  # fmt: skip
        path = f"tasks/{owner}/tool-calls/{first['tool_call']}/result"
        status, answer = api.post(path, failed)
        assert (status, answer["decision"]) == (200, terms.CONTINUE)
        assert Operation.objects.get(operation_key=key).state == terms.NOT_COMMITTED

        executed = race_for_the_key(api, task_ids, body)

        operation = Operation.objects.get(namespace="ns-retry", operation_key=key)
        assert (operation.state, operation.tool_call.pk, operation.attempts) == (
            terms.IN_FLIGHT,
            executed,
            2,
        )
