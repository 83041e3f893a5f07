"""The bench's floor endpoint does the database work of a gate, and that work only: the task's
lock, a model call row after the task's last trace row, the task's counters, the agent's day
reservation. The bench prints it beside the baseline as what the guarantees cost; these
tests hold it to writing what a gate writes (a floor that skipped a write would flatter the
guard's figures)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents.models import AgentDay, ModelCall, Task

FLOOR = "/api/v1/_bench/floor"
pytestmark = pytest.mark.urls("tests.devtools.floor_urls")


def test_each_floor_request_writes_a_gates_rows(agent_api, agent):
    task_id = agent_api.post("tasks", {"goal": "Export every invoice"}).body["id"]
    gate = agent_api.post(f"tasks/{task_id}/model-calls", {"model": "m"})
    assert gate.status_code == 200, gate.body
    before = Task.objects.get(pk=task_id)

    answers = [agent_api.post(FLOOR, {"task": task_id}) for _ in range(2)]

    assert [a.status_code for a in answers] == [200, 200]
    task = Task.objects.get(pk=task_id)
    assert task.trace_seq == before.trace_seq + 2
    assert task.model_calls == before.model_calls + 2
    assert task.updated_at > before.updated_at
    calls = list(ModelCall.objects.filter(task=task).order_by("seq"))
    assert [c.seq for c in calls[-2:]] == [before.trace_seq + 1, before.trace_seq + 2]
    assert [a.body for a in answers] == [
        {"decision": "ALLOW", "model_call": c.pk, "round": c.round} for c in calls[-2:]
    ]
    assert all(c.decision == "ALLOW" and c.reserved_cost == Decimal("0.0007") for c in calls[-2:])
    day = AgentDay.objects.get(agent=agent[1], day=calls[-1].created_at.date())
    gated = calls[0].reserved_cost
    assert day.reserved == gated + 2 * Decimal("0.0007")


def test_another_agents_task_or_a_body_without_a_task_id_changes_nothing(
    agent_api, other_agent_api
):
    task_id = agent_api.post("tasks", {"goal": "Export every invoice"}).body["id"]

    refused = [
        other_agent_api.post(FLOOR, {"task": task_id}),
        agent_api.post(FLOOR, {"task": "not-a-uuid"}),
        agent_api.post(FLOOR, {"task": 7}),
        agent_api.post(FLOOR, raw="[1, 2]"),
    ]

    assert [(r.status_code, r.body["error"]["code"]) for r in refused] == [
        (404, "TASK_NOT_FOUND"),
        (400, "INVALID_FIELDS"),
        (400, "INVALID_FIELDS"),
        (400, "INVALID_FIELDS"),
    ]
    assert not ModelCall.objects.exists()
    assert not AgentDay.objects.exists()
    assert Task.objects.get(pk=task_id).trace_seq == 0


def test_the_floor_checks_the_token_as_a_gate_does_in_as_many_statements(client, agent_api):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.conftest import Caller

    task_id = agent_api.post("tasks", {"goal": "Export every invoice"}).body["id"]
    agent_api.post(f"tasks/{task_id}/model-calls", {"model": "m"})  # the day row exists
    stranger = Caller(client, "lw_not-a-real-token")

    refused = stranger.post(FLOOR, {"task": task_id})
    with CaptureQueriesContext(connection) as floor:
        assert agent_api.post(FLOOR, {"task": task_id}).status_code == 200
    with CaptureQueriesContext(connection) as gate:
        assert agent_api.post(f"tasks/{task_id}/model-calls", {"model": "m"}).status_code == 200

    assert (refused.status_code, refused.body["error"]["code"]) == (401, "UNAUTHENTICATED")
    sent = [[q["sql"] for q in c.captured_queries if "SAVEPOINT" not in q["sql"]]
            for c in (floor, gate)]  # fmt: skip
    assert len(sent[0]) == len(sent[1]), sent
