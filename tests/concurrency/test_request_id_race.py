"""Racing repeats of one decision request (the same request_id, sent again while the first is
still being decided): one counts, and every one is answered the first answer.

A repeat waits for the task lock the first holds; its lock statement then reads the kept
answers as of its start (none yet), so it decides again and finds the id taken when its answer
is inserted (or its call already settled), and is decided once more, reading the first's."""

from __future__ import annotations

from functools import partial

import pytest

from agents.guard import terms
from agents.models import ModelCall, RequestAnswer, Task, ToolCall
from ledger.models import Operation
from tests.live import race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]

REPEATS = 8


def _all_the_same(answers):
    statuses = {status for status, _ in answers}
    assert statuses == {200}, answers
    first = answers[0][1]
    assert all(answer == first for _, answer in answers), answers
    return first


def test_racing_repeats_of_each_decision_count_once(make_agent, api_for):
    _, token = make_agent("repeater", namespace="ns-repeat")
    api = api_for(token)
    task_id = api.post("tasks", {"goal": "send the invoices"})[1]["id"]
    path = f"tasks/{task_id}"

    def raced(suffix, body, request_id):
        send = partial(api.post, f"{path}/{suffix}", {**body, "request_id": request_id})
        return _all_the_same(race([send for _ in range(REPEATS)]))

    gate = raced("model-calls", {"model": "m", "est_prompt_tokens": 10}, "g1")
    assert gate["decision"] == terms.ALLOW
    raced(f"model-calls/{gate['model_call']}/usage",
          {"prompt_tokens": 10, "completion_tokens": 5}, "u1")  # fmt: skip
    asked = raced("tool-calls", {"tool": "send_invoice", "args": {"n": 1}, "effect": "write",
                                 "operation_key": "invoice-1"}, "t1")  # fmt: skip
    assert asked["decision"] == terms.EXECUTE
    reported = raced(
        f"tool-calls/{asked['tool_call']}/result",
        {"kind": "SUCCESS", "evidence": {"revision": 1, "done": False, "committed": True}},
        "r1",
    )
    assert reported == {"decision": "CONTINUE", "revision": 1}
    finished = raced("finish", {"evidence": {"revision": 1, "done": True}}, "f1")
    assert finished["state"] == terms.COMPLETED

    task = Task.objects.get(pk=task_id)
    assert (task.model_calls, task.tool_requests, task.tool_executions, task.tokens_used) == (
        1, 1, 1, 15
    )  # fmt: skip
    assert ModelCall.objects.filter(task=task).count() == 1
    assert ToolCall.objects.filter(task=task).count() == 1
    assert Operation.objects.get(namespace="ns-repeat").state == terms.OP_COMMITTED
    assert RequestAnswer.objects.filter(task=task).count() == 5
