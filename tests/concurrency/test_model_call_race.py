"""Racing model-call gates on one task: the budget holds exactly, whichever workers answer."""

from __future__ import annotations

from collections import Counter
from functools import partial

import pytest

from agents.guard import terms
from agents.models import ModelCall, Task
from tests.live import race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]


def test_thirty_racing_gates_with_a_budget_of_ten_allow_exactly_ten(make_agent, api_for):
    _, token = make_agent("planner", namespace="ns-plan")
    api = api_for(token)
    status, task = api.post("tasks", {"goal": "plan", "limits": {"max_model_calls": 10}})
    assert status == 201 and task["limits"]["max_model_calls"] == 10

    gate = {"model": "m", "est_prompt_tokens": 100, "max_output_tokens": 50}
    answers = race([partial(api.post, f"tasks/{task['id']}/model-calls", gate)] * 30)

    assert [status for status, _ in answers] == [200] * 30, answers
    decisions = Counter(body["decision"] for _, body in answers)
    assert decisions == {terms.ALLOW: 10, terms.STOP: 20}
    rounds = sorted(body["round"] for _, body in answers if body["decision"] == terms.ALLOW)
    assert rounds == list(range(1, 11))
    reports = [body["report"] for _, body in answers if body["decision"] == terms.STOP]
    assert all(report == reports[0] for report in reports), "a stop answers one stored report"
    assert (reports[0]["state"], reports[0]["reason"]) == (terms.PARTIAL, "model_budget")

    row = Task.objects.get(pk=task["id"])
    assert row.model_calls == 10
    assert (row.state, row.reason) == (terms.PARTIAL, "model_budget")
    assert ModelCall.objects.filter(task=row, decision=terms.ALLOW).count() == 10
    assert sorted(ModelCall.objects.filter(task=row).values_list("seq", flat=True)) == list(
        range(1, 31)
    )
