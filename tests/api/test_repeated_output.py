"""repeated_output: the model plans the same tool calls three turns in a row."""

from __future__ import annotations

import pytest

from .helpers import (
    assert_stop_is_sticky,
    assert_stopped,
    evidence,
    execute,
    gate,
    get_task,
    new_task,
    report,
    request_tool,
    settle,
)

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


POLL_PLAN = [{"name": "poll", "args": {"job": "j9"}}]


def test_a_model_that_asks_for_the_same_status_poll_each_round_is_waiting(agent_api):
    task = new_task(agent_api)
    for _ in range(5):
        allowed = gate(agent_api, task["id"])
        assert settle(agent_api, task["id"], allowed["model_call"], tool_calls=POLL_PLAN) == {
            "decision": "CONTINUE"
        }
        asked = request_tool(agent_api, task["id"], "poll", {"job": "j9"}, job_id="j9")
        assert asked["decision"] == "EXECUTE", asked
        answer = report(
            agent_api, task["id"], asked["tool_call"], "PENDING", job_id="j9", wait_ms=10
        )
        assert answer["decision"] == "CONTINUE", answer

    assert get_task(agent_api, task["id"])["state"] == "RUNNING"


def test_verified_progress_restarts_the_streak(agent_api):
    task = new_task(agent_api)
    for n in range(1, 5):
        allowed = gate(agent_api, task["id"])
        assert settle(agent_api, task["id"], allowed["model_call"], tool_calls=PLAN) == {
            "decision": "CONTINUE"
        }
        execute(
            agent_api, task["id"], "search", {"q": "invoice 42", "page": n},
            result={"kind": "SUCCESS", "evidence": evidence(n)},
        )  # fmt: skip

    assert get_task(agent_api, task["id"])["state"] == "RUNNING"


DRIFTING = [
    [{"name": "search", "args": {"q": q}}]
    for q in ("refund policy", "policy for refunds", "refunds policy")
]


def test_with_a_threshold_three_similar_plans_stop_and_the_texts_persist(agent_api):
    task = new_task(agent_api, limits={"near_duplicate_threshold": 0.8})
    answers = []
    for plan in DRIFTING:
        allowed = gate(agent_api, task["id"])
        answers.append(settle(agent_api, task["id"], allowed["model_call"], tool_calls=plan))

    assert [a["decision"] for a in answers] == ["CONTINUE", "CONTINUE", "STOP"]
    assert_stopped(answers[-1], "PARTIAL", "repeated_output", "GUARD_LOOP_DETECTED")


def test_with_a_threshold_two_similar_reflections_stop(agent_api):
    task = new_task(agent_api, limits={"near_duplicate_threshold": 0.9})
    answers = []
    for text in (
        "Let me look at the refund policy.",
        "Let me look at the refund policy!",
    ):
        allowed = gate(agent_api, task["id"])
        answers.append(settle(agent_api, task["id"], allowed["model_call"], output_text=text))

    assert [a["decision"] for a in answers] == ["CONTINUE", "STOP"]
    assert answers[-1]["reason"] == "repeated_output"
