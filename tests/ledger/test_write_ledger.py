"""The operation ledger: a committed write never runs twice, in this task or any other task of
the namespace; another namespace has its own ledger."""

from __future__ import annotations

import pytest

from ledger.models import Operation
from tests.api.helpers import NOTICE, NOTICE_KEY, evidence, execute, get_task, new_task, send_notice
from tests.conftest import Caller

pytestmark = pytest.mark.django_db

COMMITTED = {
    "kind": "SUCCESS",
    "data": {"message_id": "m-1"},
    "evidence": evidence(1, committed=True, milestone="notice_sent"),
}


def commit_notice(api, task_id):
    asked, answered = execute(
        api,
        task_id,
        "send_email",
        NOTICE,
        "write",
        operation_key=NOTICE_KEY,
        result=COMMITTED,
    )
    assert answered["decision"] == "CONTINUE"
    return asked


def test_it_claims_the_key_in_flight_with_a_lease_on_execute(agent_api):
    task = new_task(agent_api)

    asked = send_notice(agent_api, task["id"])

    assert asked["decision"] == "EXECUTE"
    assert asked["lease_expires_at"]
    operation = Operation.objects.get(operation_key=NOTICE_KEY)
    assert (operation.state, operation.namespace) == ("IN_FLIGHT", "ns-a")


def test_it_commits_a_write_proven_by_the_verifier(agent_api):
    task = new_task(agent_api)

    commit_notice(agent_api, task["id"])

    operation = Operation.objects.get(operation_key=NOTICE_KEY)
    assert operation.state == "COMMITTED"
    assert operation.result == {"message_id": "m-1"}
    assert get_task(agent_api, task["id"])["revision"] == 1


def test_it_reuses_a_committed_write_instead_of_running_it_again(agent_api):
    task = new_task(agent_api)
    commit_notice(agent_api, task["id"])

    again = send_notice(agent_api, task["id"])

    assert again["decision"] == "REUSE"
    assert again["result"] == {"message_id": "m-1"}
    body = get_task(agent_api, task["id"])
    assert body["usage"]["tool_executions"] == 1
    assert body["usage"]["tool_requests"] == 2


def test_it_reuses_the_write_for_another_task_of_the_namespace(agent_api, make_agent, client):
    first = new_task(agent_api)
    commit_notice(agent_api, first["id"])
    restarted = new_task(agent_api, goal="Close incident 42 (restarted)")
    _, sibling_token = make_agent("agent-a2", namespace="ns-a")
    sibling = Caller(client, sibling_token)
    sibling_task = new_task(sibling)

    again = send_notice(agent_api, restarted["id"])
    from_sibling = send_notice(sibling, sibling_task["id"])

    assert again["decision"] == "REUSE"
    assert from_sibling["decision"] == "REUSE"
    assert from_sibling["result"] == {"message_id": "m-1"}
    assert get_task(agent_api, restarted["id"])["usage"]["tool_executions"] == 0
    assert get_task(sibling, sibling_task["id"])["usage"]["tool_executions"] == 0
    assert Operation.objects.get().attempts == 1


def test_it_keeps_another_namespaces_ledger_apart(agent_api, other_agent_api):
    first = new_task(agent_api)
    commit_notice(agent_api, first["id"])
    theirs = new_task(other_agent_api)

    answer = send_notice(other_agent_api, theirs["id"])

    assert answer["decision"] == "EXECUTE"
    assert other_agent_api.get("operations").body["operations"][0]["namespace"] == "ns-b"
    ours = Operation.objects.get(namespace="ns-a")
    assert other_agent_api.get(f"operations/{ours.pk}").status_code == 404
    assert [op["namespace"] for op in agent_api.get("operations").body["operations"]] == ["ns-a"]


def test_it_lets_a_second_request_wait_while_the_write_is_in_flight(agent_api):
    first = new_task(agent_api)
    second = new_task(agent_api)
    assert send_notice(agent_api, first["id"])["decision"] == "EXECUTE"

    answer = send_notice(agent_api, second["id"])

    assert answer["decision"] == "WAIT"
    assert answer["retry_after_ms"] > 0
    assert get_task(agent_api, second["id"])["usage"]["tool_executions"] == 0


def test_it_executes_a_key_proven_not_committed_again(agent_api):
    task = new_task(agent_api)
    asked = send_notice(agent_api, task["id"])
    not_sent = agent_api.post(
        f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result",
        {"kind": "RETRYABLE", "wait_ms": 100, "evidence": evidence(0, committed=False)},
    )
    assert not_sent.body["decision"] == "CONTINUE"
    assert Operation.objects.get().state == "NOT_COMMITTED"

    again = send_notice(agent_api, task["id"])

    assert again["decision"] == "EXECUTE"
    assert Operation.objects.get().state == "IN_FLIGHT"
    assert get_task(agent_api, task["id"])["usage"]["tool_executions"] == 2


def test_it_counts_a_reuse_as_a_step_without_progress(agent_api):
    task = new_task(agent_api, limits={"max_stagnant": 1})
    commit_notice(agent_api, task["id"])

    answer = send_notice(agent_api, task["id"])

    assert answer["decision"] == "STOP"
    assert (answer["state"], answer["reason"]) == ("PARTIAL", "no_progress")
    assert answer["report"]["usage"]["tool_executions"] == 1
    assert Operation.objects.get().state == "COMMITTED"
