"""Racing model-call gates and usage reports of one agent: its daily money stays exact.

Every gate reserves its estimate on the agent's day row and every usage report swaps that
reservation for the actual cost, from several tasks and workers at once. Lost updates would
leave the day's `spent`/`reserved` different from the sum over the calls; a gate that read a
stale day row would let the agent past its daily cap.
"""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from django.db.models import Sum
from django.utils import timezone

from agents.guard import terms
from agents.models import AgentDay, ModelCall, ModelPrice, Task
from tests.live import race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]

CAP = Decimal("0.020000")
ESTIMATE = Decimal("0.002000")  # 1000 prompt + 500 output tokens at 1.00 / 2.00 per million
TASKS, THREADS_PER_TASK = 4, 3


def _sum(query, field) -> Decimal:
    return query.aggregate(total=Sum(field))["total"] or Decimal(0)


def spend_racing(api, task_ids: list[str], prompt_tokens: int) -> tuple[list[int], list]:
    """THREADS_PER_TASK threads per task gate and settle until the guard stops their task;
    every fourth allowed call stays unsettled. The calls each thread was allowed, and every
    answer that was not 200."""
    failures: list[tuple[int, object]] = []
    allow_number = itertools.count(1)  # next() is atomic under the GIL

    def spend(task_id: str) -> int:
        allowed = 0
        gate = {"model": "gpt-race", "est_prompt_tokens": 1000, "max_output_tokens": 500}
        while True:
            status, answer = api.post(f"tasks/{task_id}/model-calls", gate)
            if status != 200:
                failures.append((status, answer))
                return allowed
            if answer["decision"] == terms.STOP:
                return allowed
            allowed += 1
            if next(allow_number) % 4 == 0:
                continue  # a reservation that is never settled stays reserved
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 500}
            path = f"tasks/{task_id}/model-calls/{answer['model_call']}/usage"
            status, answer = api.post(path, usage)
            if status != 200:
                failures.append((status, answer))

    tasks = len(task_ids)
    threads = range(tasks * THREADS_PER_TASK)
    allowed = race([lambda t=t: spend(task_ids[t % tasks]) for t in threads])
    return allowed, failures


@pytest.mark.parametrize(
    ("prompt_tokens", "actual"),
    [
        # Usage equal to the estimate: the cap admits exactly CAP / ESTIMATE calls.
        (1000, ESTIMATE),
        # Usage below the estimate: settlements free room while other gates are deciding.
        (500, Decimal("0.001500")),
    ],
    ids=["actual-equals-estimate", "actual-below-estimate"],
)
def test_racing_gates_and_usage_reports_keep_the_agent_day_exact(
    make_agent, api_for, prompt_tokens, actual
):
    ModelPrice.objects.create(
        model="gpt-race", input_per_million=Decimal("1.00"), output_per_million=Decimal("2.00")
    )
    agent, token = make_agent("spender", namespace="ns-spend", daily_cap=str(CAP))
    api = api_for(token)
    task_ids = [api.post("tasks", {"goal": f"spend {i}"})[1]["id"] for i in range(TASKS)]
    allowed, failures = spend_racing(api, task_ids, prompt_tokens)

    assert failures == []
    calls = ModelCall.objects.filter(task__agent=agent, decision=terms.ALLOW)
    assert calls.count() == sum(allowed)
    settled, open_ = calls.exclude(settled_at=None), calls.filter(settled_at=None)
    assert set(settled.values_list("cost", flat=True)) <= {actual}
    assert set(calls.values_list("reserved_cost", flat=True)) == {ESTIMATE}
    assert settled.exists() and open_.exists()

    day = AgentDay.objects.get(agent=agent, day=timezone.now().date())
    assert day.spent == _sum(settled, "cost") == actual * settled.count()
    assert day.reserved == _sum(open_, "reserved_cost") == ESTIMATE * open_.count()
    # An actual cost at or below the estimate only frees room: the cap is never crossed.
    assert day.spent + day.reserved <= CAP
    if actual == ESTIMATE:
        assert sum(allowed) == CAP / ESTIMATE

    tasks = Task.objects.filter(pk__in=task_ids)
    assert sum(t.model_calls for t in tasks) == sum(allowed)
    assert sum(t.cost_spent for t in tasks) == day.spent
    assert sum(t.cost_reserved for t in tasks) == day.reserved
    for task in tasks:
        assert task.cost_spent == _sum(settled.filter(task=task), "cost")
        assert (task.state, task.reason) == (terms.PARTIAL, "spend_cap")


def test_without_a_cap_racing_gates_still_book_the_agent_day_exactly(make_agent, api_for):
    """No daily cap: no gate reads the day's total, each ALLOW books its reservation with the
    decision's other writes. The day's money is still exactly the calls' money."""
    ModelPrice.objects.create(
        model="gpt-race", input_per_million=Decimal("1.00"), output_per_million=Decimal("2.00")
    )
    agent, token = make_agent("uncapped", namespace="ns-uncapped")
    assert agent.daily_cost_cap is None
    api = api_for(token)
    limits = {"max_model_calls": 6}
    task_ids = [
        api.post("tasks", {"goal": f"spend {i}", "limits": limits})[1]["id"] for i in range(TASKS)
    ]
    allowed, failures = spend_racing(api, task_ids, prompt_tokens=500)

    assert failures == []
    assert sum(allowed) == TASKS * limits["max_model_calls"]
    calls = ModelCall.objects.filter(task__agent=agent, decision=terms.ALLOW)
    settled, open_ = calls.exclude(settled_at=None), calls.filter(settled_at=None)
    assert settled.exists() and open_.exists()
    day = AgentDay.objects.get(agent=agent, day=timezone.now().date())
    assert day.spent == _sum(settled, "cost") == Decimal("0.001500") * settled.count()
    assert day.reserved == _sum(open_, "reserved_cost") == ESTIMATE * open_.count()
    tasks = Task.objects.filter(pk__in=task_ids)
    assert sum(t.cost_spent for t in tasks) == day.spent
    assert sum(t.cost_reserved for t in tasks) == day.reserved
