"""What still reaches Loopwarden after a stop: money already spent and writes already made."""

from __future__ import annotations

import pytest

from agents.models import ModelCall
from ledger.models import Operation

from .helpers import evidence, execute, gate, get_task, new_task, report, request_tool, settle

pytestmark = pytest.mark.django_db


def test_it_records_a_usage_report_after_the_stop_but_answers_stop(agent_api, operator_api, price):
    task = new_task(agent_api)
    allowed = gate(agent_api, task["id"], est_prompt_tokens=100, max_output_tokens=100)
    stopped = operator_api.post(f"tasks/{task['id']}/stop", {"reason": "runaway"}).body

    answer = settle(
        agent_api, task["id"], allowed["model_call"], prompt_tokens=100, completion_tokens=100
    )

    assert answer["decision"] == "STOP"
    assert answer["report"] == stopped["report"]
    body = get_task(agent_api, task["id"])
    assert body["state"] == "STOPPED"
    assert body["usage"]["tokens"] == 200
    assert body["usage"]["cost"] == "0.3000"
    assert body["usage"]["model_calls"] == 1
    assert body["report"]["usage"]["tokens"] == 0
    assert ModelCall.objects.get(pk=allowed["model_call"]).settled_at is not None


def test_it_refuses_a_second_usage_report_for_the_same_call(agent_api):
    task = new_task(agent_api)
    allowed = gate(agent_api, task["id"])
    settle(agent_api, task["id"], allowed["model_call"])

    again = agent_api.post(
        f"tasks/{task['id']}/model-calls/{allowed['model_call']}/usage",
        {"prompt_tokens": 5, "completion_tokens": 5},
    )

    assert again.status_code == 409
    assert again.body["error"]["code"] == "USAGE_ALREADY_REPORTED"
    assert get_task(agent_api, task["id"])["usage"]["tokens"] == 120


def test_it_commits_a_write_whose_result_arrives_after_an_operator_stop(agent_api, operator_api):
    task = new_task(agent_api)
    asked = request_tool(
        agent_api, task["id"], "send_email", {"to": "x"}, "write", operation_key="notice-1"
    )
    stopped = operator_api.post(f"tasks/{task['id']}/stop", {"reason": "runaway"}).body
    assert stopped["report"]["operations"] == [{"key": "notice-1", "state": "IN_FLIGHT"}]

    answer = report(
        agent_api,
        task["id"],
        asked["tool_call"],
        "SUCCESS",
        data={"id": "m-9"},
        evidence=evidence(1, committed=True),
    )

    assert answer["decision"] == "STOP"
    assert answer["report"] == stopped["report"]
    operation = Operation.objects.get(operation_key="notice-1")
    assert operation.state == "COMMITTED"
    assert operation.result == {"id": "m-9"}
    body = get_task(agent_api, task["id"])
    assert (body["state"], body["reason"]) == ("STOPPED", "operator_stop")
    assert body["usage"] == stopped["usage"]


def test_it_marks_a_write_lost_after_the_stop_unknown(agent_api, operator_api):
    task = new_task(agent_api)
    asked = request_tool(
        agent_api, task["id"], "send_email", {"to": "x"}, "write", operation_key="notice-1"
    )
    operator_api.post(f"tasks/{task['id']}/stop", {"reason": "runaway"})

    answer = report(agent_api, task["id"], asked["tool_call"], "NO_RESULT")

    assert answer["decision"] == "STOP"
    assert Operation.objects.get().state == "UNKNOWN"
    assert get_task(agent_api, task["id"])["reason"] == "operator_stop"


def test_it_refuses_a_result_for_a_call_that_did_not_execute(agent_api):
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "x"})
    execute(agent_api, task["id"], "search", {"q": "x"})
    blocked = request_tool(agent_api, task["id"], "search", {"q": "x"})
    assert blocked["decision"] == "BLOCK"

    response = agent_api.post(
        f"tasks/{task['id']}/tool-calls/{blocked['tool_call']}/result",
        {"kind": "SUCCESS", "evidence": evidence(1)},
    )

    assert response.status_code == 409
    assert response.body["error"]["code"] == "TOOL_CALL_NOT_EXECUTED"
    assert get_task(agent_api, task["id"])["revision"] == 0


def test_it_refuses_a_second_result_for_the_same_call(agent_api):
    task = new_task(agent_api)
    asked = request_tool(agent_api, task["id"], "search", {"q": "x"})
    report(agent_api, task["id"], asked["tool_call"], "SUCCESS")

    again = agent_api.post(
        f"tasks/{task['id']}/tool-calls/{asked['tool_call']}/result",
        {"kind": "SUCCESS", "evidence": evidence(5, done=True)},
    )

    assert again.status_code == 409
    assert again.body["error"]["code"] == "RESULT_ALREADY_REPORTED"
    assert get_task(agent_api, task["id"])["state"] == "RUNNING"
