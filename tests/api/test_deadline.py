"""The deadline: a task past its wall-clock time stops PARTIAL/deadline before more work."""

from __future__ import annotations

import time

import pytest

from .helpers import (
    assert_stop_is_sticky,
    assert_stopped,
    execute,
    gate,
    get_task,
    move_deadline_to_the_past,
    new_task,
    report,
    request_tool,
)

pytestmark = pytest.mark.django_db


def test_it_stops_the_model_gate_once_the_deadline_has_passed(agent_api):
    task = new_task(agent_api)
    move_deadline_to_the_past(task["id"])

    answer = gate(agent_api, task["id"])

    stop_report = assert_stopped(answer, "PARTIAL", "deadline", "GUARD_TIME_LIMIT")
    assert stop_report["usage"]["model_calls"] == 0
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_stops_a_tool_request_once_the_deadline_has_passed(agent_api):
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "a"})
    move_deadline_to_the_past(task["id"])

    answer = request_tool(agent_api, task["id"], "search", {"q": "b"})

    stop_report = assert_stopped(answer, "PARTIAL", "deadline", "GUARD_TIME_LIMIT")
    assert stop_report["usage"]["tool_executions"] == 1
    assert stop_report["usage"]["tool_requests"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_honours_a_one_second_deadline_given_at_creation(agent_api):
    task = new_task(agent_api, limits={"deadline_seconds": 1})
    assert task["limits"]["deadline_seconds"] == 1

    time.sleep(1.05)
    answer = gate(agent_api, task["id"])

    assert_stopped(answer, "PARTIAL", "deadline", "GUARD_TIME_LIMIT")


@pytest.mark.parametrize("kind", ["RETRYABLE", "PENDING"])
def test_it_stops_when_the_asked_wait_reaches_past_the_deadline(agent_api, kind):
    task = new_task(agent_api, limits={"deadline_seconds": 60})
    asked = request_tool(agent_api, task["id"], "export", {"id": 1})

    answer = report(agent_api, task["id"], asked["tool_call"], kind, wait_ms=61_000, job_id="j1")

    stop_report = assert_stopped(answer, "PARTIAL", "deadline", "GUARD_TIME_LIMIT")
    assert stop_report["usage"]["tool_executions"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_lets_a_wait_inside_the_deadline_continue(agent_api):
    task = new_task(agent_api, limits={"deadline_seconds": 60})
    asked = request_tool(agent_api, task["id"], "export", {"id": 1})

    answer = report(agent_api, task["id"], asked["tool_call"], "PENDING", wait_ms=500, job_id="j1")

    assert answer == {"decision": "CONTINUE", "revision": 0, "wait_ms": 500}
    assert get_task(agent_api, task["id"])["state"] == "RUNNING"
