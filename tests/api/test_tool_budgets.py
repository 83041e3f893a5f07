"""Tool budgets: requests, executions, retries and polls refuse the next step before it runs."""

from __future__ import annotations

import pytest

from .helpers import (
    assert_stop_is_sticky,
    assert_stopped,
    evidence,
    execute,
    get_task,
    new_task,
    report,
    request_tool,
)

pytestmark = pytest.mark.django_db


def progress(revision: int) -> dict:
    return {"kind": "SUCCESS", "evidence": evidence(revision)}


def read_two_pages(api, **limits) -> dict:
    """A task with `limits` that read pages 1 and 2, each with verified progress."""
    task = new_task(api, limits=limits)
    for n in (1, 2):
        execute(api, task["id"], "page", {"n": n}, result=progress(n))
    return task


def start_export(api, task_id) -> None:
    """Start job-7; the tool answers PENDING, to be polled."""
    started = request_tool(api, task_id, "start_export", {"id": 7})
    report(api, task_id, started["tool_call"], "PENDING", job_id="job-7", wait_ms=100)


def poll_export(api, task_id) -> dict:
    return request_tool(api, task_id, "export_status", {"job": "job-7"}, job_id="job-7")


def test_it_refuses_the_tool_request_past_max_tool_requests(agent_api):
    task = read_two_pages(agent_api, max_tool_requests=2)

    answer = request_tool(agent_api, task["id"], "page", {"n": 3})

    stop_report = assert_stopped(answer, "PARTIAL", "request_budget", "GUARD_ROUND_LIMIT")
    assert stop_report["usage"]["tool_requests"] == 2
    assert stop_report["usage"]["tool_executions"] == 2
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_refuses_the_execution_past_max_tool_executions(agent_api):
    task = read_two_pages(agent_api, max_tool_executions=2)

    answer = request_tool(agent_api, task["id"], "page", {"n": 3})

    stop_report = assert_stopped(answer, "PARTIAL", "execution_budget", "GUARD_ROUND_LIMIT")
    assert stop_report["usage"]["tool_requests"] == 3
    assert stop_report["usage"]["tool_executions"] == 2
    assert stop_report["remaining"]["tool_executions"] == 0
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_draws_retries_of_every_layer_from_one_budget(agent_api):
    task = new_task(agent_api, limits={"max_retries": 3})
    asked = request_tool(agent_api, task["id"], "fetch", {"url": "a"})
    # The HTTP layer already retried twice under the tool: three attempts in one report.
    first = report(agent_api, task["id"], asked["tool_call"], "RETRYABLE", attempts=3, wait_ms=100)
    assert first == {"decision": "CONTINUE", "revision": 0, "wait_ms": 100}
    asked = request_tool(agent_api, task["id"], "fetch", {"url": "b"})

    answer = report(agent_api, task["id"], asked["tool_call"], "RETRYABLE", wait_ms=100)

    stop_report = assert_stopped(answer, "PARTIAL", "retry_budget", "GUARD_ROUND_LIMIT")
    assert stop_report["usage"]["retries"] == 4
    assert stop_report["usage"]["tool_executions"] == 2
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_refuses_the_poll_past_max_polls(agent_api):
    task = new_task(agent_api, limits={"max_polls": 2})
    start_export(agent_api, task["id"])
    for _ in range(2):
        poll = poll_export(agent_api, task["id"])
        assert poll["decision"] == "EXECUTE"
        waited = report(agent_api, task["id"], poll["tool_call"], "PENDING", wait_ms=100)
        assert waited["decision"] == "CONTINUE"

    answer = poll_export(agent_api, task["id"])

    stop_report = assert_stopped(answer, "PARTIAL", "poll_budget", "GUARD_ROUND_LIMIT")
    assert stop_report["usage"]["polls"] == 2
    assert stop_report["usage"]["tool_executions"] == 3
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_does_not_count_waiting_as_a_step_without_progress(agent_api):
    task = new_task(agent_api, limits={"max_polls": 5, "max_stagnant": 1})
    start_export(agent_api, task["id"])
    for _ in range(4):
        poll = poll_export(agent_api, task["id"])
        report(agent_api, task["id"], poll["tool_call"], "PENDING", wait_ms=100)

    body = get_task(agent_api, task["id"])

    assert body["state"] == "RUNNING"
    assert body["stagnant"] == 0
    assert body["usage"]["polls"] == 4
