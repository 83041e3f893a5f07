"""A retention prune racing live decisions and a resume of an old task, on PostgreSQL.

The prune deletes rows of ended tasks in small transactions and never locks a live task's row.
So every decision of the running tasks answers 200 and keeps its trace row; the old task that
an operator resumes mid-prune keeps every row its new phase writes (the prune removes only rows
created before its cutoff); and the other old tasks end with no trace left.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.guard import terms
from agents.models import Event, ModelCall, Task, ToolCall
from agents.services import retention
from tests.live import race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]

OLD_TASKS = 6
CALLS_PER_OLD_TASK = 8
LIVE_THREADS = 4
PER_THREAD = 10
LONG_AGO = timedelta(days=40)


def test_a_prune_racing_live_decisions_removes_only_the_old_trace(make_agent, make_user, api_for):
    _, agent_token = make_agent("busy", namespace="ns-busy")
    _, operator_token = make_user("olivia")
    agent, operator = api_for(agent_token), api_for(operator_token)

    old = []
    for n in range(OLD_TASKS):
        task_id = agent.post("tasks", {"goal": f"old work {n}"})[1]["id"]
        for call in range(CALLS_PER_OLD_TASK):
            body = {"tool": "lookup", "args": {"n": n, "call": call}, "effect": "read"}
            assert agent.post(f"tasks/{task_id}/tool-calls", body)[0] == 200
        assert operator.post(f"tasks/{task_id}/stop", {"reason": "done"})[0] == 200
        old.append(task_id)
    # Make them old: ended, and traced, long before the cutoff.
    long_ago = timezone.now() - LONG_AGO
    Task.objects.filter(pk__in=old).update(ended_at=long_ago)
    for model in (ToolCall, ModelCall, Event):
        model.objects.filter(task_id__in=old).update(created_at=long_ago)
    resumed = old[0]
    live = [agent.post("tasks", {"goal": f"live {n}"})[1]["id"] for n in range(LIVE_THREADS)]

    answers: list[tuple[int, dict]] = []

    def decide(task_id: str, thread: int) -> None:
        for n in range(PER_THREAD):
            body = {"tool": "lookup", "args": {"thread": thread, "n": n}, "effect": "read"}
            answers.append(agent.post(f"tasks/{task_id}/tool-calls", body))

    def resume_and_decide() -> None:
        grant = {"reason": "one more look", "grant": {"seconds": 600}}
        status, body = operator.post(f"tasks/{resumed}/resume", grant)
        assert status == 200, body
        decide(resumed, 99)

    def prune() -> retention.PruneResult:
        return retention.trace_prune(days=30, batch_rows=3)

    results = race(
        [lambda t=t, task=task: decide(task, t) for t, task in enumerate(live)]
        + [resume_and_decide, prune]
    )

    assert [status for status, _ in answers] == [200] * (LIVE_THREADS + 1) * PER_THREAD, answers
    assert {body["decision"] for _, body in answers} == {terms.EXECUTE}
    for task_id in live:
        seqs = list(ToolCall.objects.filter(task_id=task_id).values_list("seq", flat=True))
        assert sorted(seqs) == list(range(1, PER_THREAD + 1))
    # The resumed task keeps every call of its new phase, whatever the prune reached first.
    new_calls = ToolCall.objects.filter(task_id=resumed, phase=2)
    assert new_calls.count() == PER_THREAD
    for task_id in old[1:]:
        assert not ToolCall.objects.filter(task_id=task_id).exists()
        assert Task.objects.get(pk=task_id).trace_pruned_at is not None
    assert results[-1].rows["tool_calls"] >= (OLD_TASKS - 1) * CALLS_PER_OLD_TASK
    assert Task.objects.get(pk=resumed).state == terms.RUNNING
