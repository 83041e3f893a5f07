"""same_call: the same tool with the same effective args again and again."""

from __future__ import annotations

import pytest

from agents.models import ToolPolicy

from .helpers import (
    assert_stop_is_sticky,
    assert_stopped,
    evidence,
    execute,
    get_task,
    new_task,
    request_tool,
)

pytestmark = pytest.mark.django_db


def test_it_blocks_the_third_identical_read_then_stops_on_the_fourth(agent_api):
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "invoice 42"})
    execute(agent_api, task["id"], "search", {"q": "invoice 42"})

    blocked = request_tool(agent_api, task["id"], "search", {"q": "invoice 42"})
    assert blocked["decision"] == "BLOCK"
    assert blocked["observation"]["code"] == "DUPLICATE_TOOL_CALL_BLOCKED"
    assert blocked["observation"]["success"] is False
    assert blocked["observation"]["retryable"] is False
    assert get_task(agent_api, task["id"])["state"] == "RUNNING"

    answer = request_tool(agent_api, task["id"], "search", {"q": "invoice 42"})

    stop_report = assert_stopped(answer, "PARTIAL", "same_call", "GUARD_LOOP_DETECTED")
    assert stop_report["usage"]["tool_executions"] == 2
    assert stop_report["usage"]["tool_requests"] == 4
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_stops_without_a_nudge_when_repeat_action_is_stop(agent_api):
    task = new_task(agent_api, limits={"repeat_action": "stop"})
    execute(agent_api, task["id"], "search", {"q": "invoice 42"})
    execute(agent_api, task["id"], "search", {"q": "invoice 42"})

    answer = request_tool(agent_api, task["id"], "search", {"q": "invoice 42"})

    stop_report = assert_stopped(answer, "PARTIAL", "same_call", "GUARD_LOOP_DETECTED")
    assert stop_report["usage"]["tool_executions"] == 2
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_treats_reordered_keys_as_the_same_call(agent_api):
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "x", "page": {"n": 1, "size": 10}})
    execute(agent_api, task["id"], "search", {"page": {"size": 10, "n": 1}, "q": "x"})

    blocked = request_tool(
        agent_api, task["id"], "search", {"page": {"n": 1, "size": 10}, "q": "x"}
    )

    assert blocked["decision"] == "BLOCK"


def test_it_ignores_the_fields_the_tool_policy_names(agent_api):
    ToolPolicy.objects.create(tool="search", ignore_fields=["request_id"])
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "x", "request_id": "r1"})
    execute(agent_api, task["id"], "search", {"q": "x", "request_id": "r2"})

    blocked = request_tool(agent_api, task["id"], "search", {"q": "x", "request_id": "r3"})

    assert blocked["decision"] == "BLOCK"


def test_it_forgets_the_repeats_after_verified_progress(agent_api):
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "x"})
    execute(
        agent_api,
        task["id"],
        "search",
        {"q": "x"},
        result={"kind": "SUCCESS", "evidence": evidence(1)},
    )

    again = request_tool(agent_api, task["id"], "search", {"q": "x"})

    assert again["decision"] == "EXECUTE"


def test_it_counts_executions_whose_results_never_arrived(agent_api):
    # An agent that never reports must not repeat a read up to the execution budget.
    task = new_task(agent_api)
    for _ in range(2):
        answer = request_tool(agent_api, task["id"], "search", {"q": "invoice 42"})
        assert answer["decision"] == "EXECUTE"

    assert request_tool(agent_api, task["id"], "search", {"q": "invoice 42"})["decision"] == "BLOCK"
    answer = request_tool(agent_api, task["id"], "search", {"q": "invoice 42"})

    stop_report = assert_stopped(answer, "PARTIAL", "same_call", "GUARD_LOOP_DETECTED")
    assert stop_report["usage"]["tool_executions"] == 2


@pytest.mark.parametrize(
    ("first", "again"),
    [(1, 1.0), (0, -0.0), (100, "1e2")],
    ids=["1 then 1.0", "0 then -0.0", "100 then 1e2"],
)
def test_it_treats_the_same_number_written_another_way_as_the_same_call(agent_api, first, again):
    # JSON has one number type: 1, 1.0 and 1e0 are the same argument. A model that rewrites
    # the number must not earn a third execution of the call it repeats.
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "x", "page": first})
    execute(agent_api, task["id"], "search", {"q": "x", "page": first})

    raw = f'{{"tool": "search", "args": {{"q": "x", "page": {again}}}, "effect": "read"}}'
    blocked = agent_api.post(f"tasks/{task['id']}/tool-calls", raw=raw)

    assert blocked.status_code == 200, blocked.body
    assert blocked.body["decision"] == "BLOCK", blocked.body
