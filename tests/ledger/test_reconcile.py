"""Reconciling an UNKNOWN write, then resuming: COMMITTED is reused, NOT_COMMITTED may run again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.services import sweeps
from ledger.models import Operation, Reconciliation
from tests.api.helpers import (
    NOTICE_KEY,
    assert_stopped,
    evidence,
    get_task,
    new_task,
    report,
    send_notice,
    snapshot,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def lost_write(agent_api):
    """A task whose write timed out: NEEDS_HUMAN, the operation UNKNOWN."""
    task = new_task(agent_api)
    asked = send_notice(agent_api, task["id"])
    answer = report(agent_api, task["id"], asked["tool_call"], "NO_RESULT", error="timeout")
    assert_stopped(answer, "NEEDS_HUMAN", "unknown_commit", "GUARD_LEDGER")
    return task


def unknown_operation(api) -> dict:
    listed = api.get("operations?state=UNKNOWN")
    assert listed.status_code == 200
    (operation,) = listed.body["operations"]
    return operation


def reconcile(api, operation_id, verdict, note="checked the mail server", **extra):
    return api.post(
        f"operations/{operation_id}/reconcile", {"verdict": verdict, "note": note, **extra}
    )


def resume(api, task_id):
    return api.post(f"tasks/{task_id}/resume", {"reason": "reconciled"})


def test_it_refuses_to_resume_naming_the_unknown_operation(agent_api, operator_api, lost_write):
    response = resume(operator_api, lost_write["id"])

    assert response.status_code == 409
    assert response.body["error"]["code"] == "OPERATIONS_UNRESOLVED"
    assert NOTICE_KEY in response.body["error"]["message"]
    assert response.body["error"]["fields"] == {"operations": [NOTICE_KEY]}
    assert get_task(agent_api, lost_write["id"])["state"] == "NEEDS_HUMAN"


def test_it_reuses_a_write_reconciled_committed(agent_api, operator_api, lost_write):
    operation = unknown_operation(operator_api)
    assert operation["key"] == NOTICE_KEY

    response = reconcile(operator_api, operation["id"], "COMMITTED", result={"message_id": "m-7"})

    assert response.status_code == 200
    assert response.body["state"] == "COMMITTED"
    assert response.body["reconciliations"][0]["actor"] == "user:olivia"
    assert response.body["reconciliations"][0]["previous_state"] == "UNKNOWN"
    resumed = resume(operator_api, lost_write["id"])
    assert resumed.status_code == 200, resumed.body
    assert resumed.body["phase"] == 2
    again = send_notice(agent_api, lost_write["id"])
    assert again["decision"] == "REUSE"
    assert again["result"] == {"message_id": "m-7"}
    assert get_task(agent_api, lost_write["id"])["usage"]["tool_executions"] == 1


def test_it_executes_a_write_reconciled_not_committed_again(agent_api, operator_api, lost_write):
    operation = unknown_operation(operator_api)
    reconcile(operator_api, operation["id"], "NOT_COMMITTED")
    assert resume(operator_api, lost_write["id"]).status_code == 200

    again = send_notice(agent_api, lost_write["id"])

    assert again["decision"] == "EXECUTE"
    answer = report(
        agent_api,
        lost_write["id"],
        again["tool_call"],
        "SUCCESS",
        data={"message_id": "m-8"},
        evidence=evidence(1, committed=True),
    )
    assert answer["decision"] == "CONTINUE"
    row = Operation.objects.get(operation_key=NOTICE_KEY)
    assert (row.state, row.result, row.attempts) == ("COMMITTED", {"message_id": "m-8"}, 2)
    assert get_task(agent_api, lost_write["id"])["usage"]["tool_executions"] == 2


def test_it_keeps_refusing_the_resume_after_an_unknown_verdict(agent_api, operator_api, lost_write):
    operation = unknown_operation(operator_api)

    response = reconcile(operator_api, operation["id"], "UNKNOWN", note="mail server down")

    assert response.status_code == 200
    assert response.body["state"] == "UNKNOWN"
    assert Reconciliation.objects.count() == 1
    assert resume(operator_api, lost_write["id"]).status_code == 409


def test_it_refuses_to_reconcile_a_committed_operation(agent_api, operator_api, lost_write):
    operation = unknown_operation(operator_api)
    reconcile(operator_api, operation["id"], "COMMITTED")

    response = reconcile(operator_api, operation["id"], "NOT_COMMITTED")

    assert response.status_code == 409
    assert response.body["error"]["code"] == "OPERATION_NOT_UNKNOWN"
    assert Operation.objects.get().state == "COMMITTED"
    assert Reconciliation.objects.count() == 1


def test_it_requires_a_note_and_a_known_verdict(agent_api, operator_api, lost_write):
    operation = unknown_operation(operator_api)

    for body in (
        {"verdict": "COMMITTED"},
        {"verdict": "COMMITTED", "note": " "},
        {"verdict": "DONE", "note": "x"},
    ):
        response = operator_api.post(f"operations/{operation['id']}/reconcile", body)
        assert response.status_code == 400, body

    assert Operation.objects.get().state == "UNKNOWN"
    assert not Reconciliation.objects.exists()


def test_it_refuses_a_result_with_a_verdict_other_than_committed(
    agent_api, operator_api, lost_write
):
    # The console refuses it ("Only a COMMITTED verdict stores a result."); the API must too:
    # an audit row saying NOT_COMMITTED with a result attached contradicts itself.
    operation = unknown_operation(operator_api)

    for verdict in ("NOT_COMMITTED", "UNKNOWN"):
        response = reconcile(operator_api, operation["id"], verdict, result={"message_id": "m-1"})
        assert response.status_code == 400, (verdict, response.body)
        assert response.body["error"]["code"] == "RESULT_NOT_ALLOWED"
        assert "result" in response.body["error"]["fields"]

    assert Operation.objects.get().state == "UNKNOWN"
    assert not Reconciliation.objects.exists()


def test_it_shows_the_operation_with_its_history(operator_api, lost_write):
    operation = unknown_operation(operator_api)
    reconcile(operator_api, operation["id"], "NOT_COMMITTED", note="no mail in the outbox")

    body = operator_api.get(f"operations/{operation['id']}").body

    assert body["state"] == "NOT_COMMITTED"
    assert body["task"] == lost_write["id"]
    assert [r["note"] for r in body["reconciliations"]] == ["no mail in the outbox"]


def test_it_answers_404_for_an_unknown_operation(operator_api):
    assert operator_api.get("operations/999999").status_code == 404
    assert reconcile(operator_api, 999999, "COMMITTED").status_code == 404


def test_it_filters_operations_by_state(operator_api, lost_write):
    assert operator_api.get("operations?state=COMMITTED").body["operations"] == []
    bad = operator_api.get("operations?state=LOST")
    assert bad.status_code == 400
    assert bad.body["error"]["code"] == "BAD_STATE"


@pytest.mark.parametrize("verdict", ["COMMITTED", "NOT_COMMITTED"])
def test_a_late_result_of_a_reconciled_write_leaves_the_verdict_and_the_resumed_task_alone(
    agent_api, operator_api, verdict
):
    # The agent went silent on a write; the lease ran out; an operator found out what
    # happened, recorded it and resumed. The old call's timeout then arrives: it knows less
    # than the verdict, so it must not stop the new phase with unknown_commit (the report
    # would list no UNKNOWN operation) nor move anything of the task.
    task = new_task(agent_api)
    asked = send_notice(agent_api, task["id"])
    Operation.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    sweeps.sweep_leases()
    operation = unknown_operation(operator_api)
    reconcile(operator_api, operation["id"], verdict)
    assert resume(operator_api, task["id"]).status_code == 200
    before = snapshot(agent_api, task["id"])

    late = report(agent_api, task["id"], asked["tool_call"], "NO_RESULT", error="timeout")

    assert late["decision"] == "CONTINUE", late
    assert snapshot(agent_api, task["id"]) == before
    assert Operation.objects.get().state == verdict
