"""An execution whose claim expired or was reconciled is no longer pending (issue 8, hole 6):
after a lost response, a reconcile, a resume and a committed retry, the same write is REUSE."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import Task
from agents.services import sweeps
from ledger.models import Operation

from .helpers import NOTICE_KEY, assert_stopped, evidence, report, request_tool, send_notice

pytestmark = pytest.mark.django_db


def lose_the_response_and_reconcile(agent_api, operator_api, task_id):
    asked = send_notice(agent_api, task_id)
    assert asked["decision"] == "EXECUTE"
    sweeps.sweep_leases(now=timezone.now() + timedelta(hours=1))
    assert Task.objects.get(pk=task_id).state == "NEEDS_HUMAN"
    operation = Operation.objects.get(operation_key=NOTICE_KEY)
    reconciled = operator_api.post(
        f"operations/{operation.pk}/reconcile",
        {"verdict": "NOT_COMMITTED", "note": "the provider has no such message"},
    )
    assert reconciled.status_code == 200, reconciled.body
    resumed = operator_api.post(f"tasks/{task_id}/resume", {"reason": "reconciled"})
    assert resumed.status_code == 200, resumed.body


def test_a_write_retried_after_an_expired_claim_is_reused_once_committed(agent_api, operator_api):
    task_id = agent_api.post("tasks", {"goal": "notify"}).body["id"]
    lose_the_response_and_reconcile(agent_api, operator_api, task_id)
    again = send_notice(agent_api, task_id)
    assert again["decision"] == "EXECUTE"
    report(agent_api, task_id, again["tool_call"], evidence=evidence(0, committed=True),
           data={"message_id": "m-1"})  # fmt: skip

    answer = send_notice(agent_api, task_id)

    assert answer["decision"] == "REUSE", answer
    assert answer["result"] == {"message_id": "m-1"}
    assert Task.objects.get(pk=task_id).pending == []


def test_the_lease_sweep_empties_the_pending_set(agent_api):
    task_id = agent_api.post("tasks", {"goal": "notify"}).body["id"]
    send_notice(agent_api, task_id)
    assert len(Task.objects.get(pk=task_id).pending) == 1

    sweeps.sweep_leases(now=timezone.now() + timedelta(hours=1))

    task = Task.objects.get(pk=task_id)
    assert task.pending == []
    assert_stopped(
        agent_api.get(f"tasks/{task_id}").body, "NEEDS_HUMAN", "unknown_commit", "GUARD_LEDGER"
    )


def test_a_reconcile_of_an_expired_claim_empties_the_pending_set(agent_api, operator_api):
    task_id = agent_api.post("tasks", {"goal": "notify"}).body["id"]
    send_notice(agent_api, task_id)
    Operation.objects.filter(operation_key=NOTICE_KEY).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    operation = Operation.objects.get(operation_key=NOTICE_KEY)

    operator_api.post(
        f"operations/{operation.pk}/reconcile", {"verdict": "NOT_COMMITTED", "note": "checked"}
    )

    assert Task.objects.get(pk=task_id).pending == []


def test_a_read_reporting_after_an_operator_stop_is_not_pending_after_the_resume(
    agent_api, operator_api
):
    # A read executes, an operator stops the task while it runs, its result arrives late, the
    # task is resumed: the call finished, so it must not count again as a pending repeat.
    task_id = agent_api.post("tasks", {"goal": "look it up"}).body["id"]
    asked = request_tool(agent_api, task_id, "search", {"q": "refund policy"})
    assert asked["decision"] == "EXECUTE"
    stopped = operator_api.post(f"tasks/{task_id}/stop", {"reason": "looking into it"})
    assert stopped.status_code == 200, stopped.body

    late = report(agent_api, task_id, asked["tool_call"], data={"hits": 3})

    assert late["decision"] == "STOP"
    assert Task.objects.get(pk=task_id).pending == []
    resumed = operator_api.post(f"tasks/{task_id}/resume", {"reason": "carry on"})
    assert resumed.status_code == 200, resumed.body
    assert Task.objects.get(pk=task_id).pending == []
