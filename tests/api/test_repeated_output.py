"""repeated_output: the model plans the same tool calls three turns in a row."""

from __future__ import annotations

import pytest

from .helpers import assert_stop_is_sticky, assert_stopped, gate, get_task, new_task, settle

pytestmark = pytest.mark.django_db

PLAN = [{"name": "search", "args": {"q": "invoice 42"}}]


def test_it_stops_on_the_third_identical_plan(agent_api):
    task = new_task(agent_api)
    for _ in range(2):
        allowed = gate(agent_api, task["id"])
        assert settle(agent_api, task["id"], allowed["model_call"], tool_calls=PLAN) == {
            "decision": "CONTINUE"
        }
    allowed = gate(agent_api, task["id"])

    answer = settle(
        agent_api,
        task["id"],
        allowed["model_call"],
        prompt_tokens=100,
        completion_tokens=20,
        tool_calls=PLAN,
    )

    stop_report = assert_stopped(answer, "PARTIAL", "repeated_output", "GUARD_LOOP_DETECTED")
    assert stop_report["usage"]["model_calls"] == 3
    assert stop_report["usage"]["tokens"] == 360
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_does_not_count_turns_without_tool_calls(agent_api):
    task = new_task(agent_api)
    for _ in range(3):
        allowed = gate(agent_api, task["id"])
        settle(agent_api, task["id"], allowed["model_call"], output_text="thinking")

    assert get_task(agent_api, task["id"])["state"] == "RUNNING"


def test_it_does_not_count_a_changed_plan(agent_api):
    task = new_task(agent_api)
    plans = [PLAN, PLAN, [{"name": "search", "args": {"q": "invoice 43"}}], PLAN]
    for plan in plans:
        allowed = gate(agent_api, task["id"])
        assert (
            settle(agent_api, task["id"], allowed["model_call"], tool_calls=plan)["decision"]
            == "CONTINUE"
        )
