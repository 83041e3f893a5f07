"""Two operators resuming the same stopped task at once: one new phase, one grant.

The resume locks the task row, so the second sees the first's RUNNING task and answers 409
TASK_RUNNING. A resume that read the task before the other committed would start phase 2
twice (two Phase rows, two audit events) or add both grants to the limits.
"""

from __future__ import annotations

from functools import partial

import pytest

from agents.models import Event, EventKind, Phase, Task
from tests.live import race

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("on_postgres"),
]

TRIALS = 5
RACERS = 4


def test_racing_resumes_start_one_phase_with_one_grant(make_agent, make_user, api_for):
    _, agent_token = make_agent("stuck", namespace="ns-stuck")
    operators = [api_for(make_user(f"op{n}")[1]) for n in range(RACERS)]
    agent = api_for(agent_token)
    for trial in range(TRIALS):
        task_id = agent.post("tasks", {"goal": f"try {trial}"})[1]["id"]
        status, _ = agent.post(f"tasks/{task_id}/stop", {"reason": "stuck"})
        assert status == 200
        before = Task.objects.get(pk=task_id)
        body = {"reason": "checked", "grant": {"model_calls": 5, "seconds": 60}}

        answers = race([partial(op.post, f"tasks/{task_id}/resume", body) for op in operators])

        statuses = sorted(status for status, _ in answers)
        assert statuses == [200] + [409] * (RACERS - 1), answers
        refused = [answer for status, answer in answers if status == 409]
        assert {a["error"]["code"] for a in refused} == {"TASK_RUNNING"}, refused
        task = Task.objects.get(pk=task_id)
        assert (task.state, task.phase) == ("RUNNING", 2)
        assert task.limits["max_model_calls"] == before.limits["max_model_calls"] + 5
        assert (task.deadline_at - before.deadline_at).total_seconds() == 60
        assert Phase.objects.filter(task=task, number=2).count() == 1
        assert Event.objects.filter(task=task, kind=EventKind.TASK_RESUMED).count() == 1
