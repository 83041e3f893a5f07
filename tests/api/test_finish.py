"""Finishing: only the verifier's evidence completes a task (goal_met, goal_unverified)."""

from __future__ import annotations

import pytest

from .helpers import assert_stop_is_sticky, assert_stopped, evidence, execute, finish, new_task

pytestmark = pytest.mark.django_db


def test_it_completes_a_task_whose_finish_carries_done_evidence(agent_api):
    task = new_task(agent_api)
    execute(
        agent_api,
        task["id"],
        "search",
        {"q": "incident"},
        result={"kind": "SUCCESS", "evidence": evidence(1, milestone="incident_loaded")},
    )

    body = finish(
        agent_api, task["id"], evidence=evidence(2, done=True, milestone="closed"), answer="Closed."
    )

    stop_report = assert_stopped(body, "COMPLETED", "goal_met", None)
    assert body["revision"] == 2
    assert stop_report["completed"] == ["incident_loaded", "closed"]
    assert stop_report["usage"]["tool_executions"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_completes_a_task_when_a_tool_result_says_done(agent_api):
    task = new_task(agent_api)

    _, answer = execute(
        agent_api,
        task["id"],
        "close_ticket_status",
        {"id": 42},
        result={"kind": "SUCCESS", "evidence": evidence(1, done=True)},
    )

    stop_report = assert_stopped(answer, "COMPLETED", "goal_met", None)
    assert answer["decision"] == "STOP"
    assert stop_report["usage"]["tool_executions"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_never_completes_on_the_agents_word_alone(agent_api):
    task = new_task(agent_api)

    body = finish(agent_api, task["id"], answer="done")

    stop_report = assert_stopped(body, "PARTIAL", "goal_unverified", None)
    assert stop_report["completed"] == []
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_does_not_complete_on_evidence_that_is_not_done(agent_api):
    task = new_task(agent_api)

    body = finish(agent_api, task["id"], evidence=evidence(1, milestone="half"), answer="done")

    stop_report = assert_stopped(body, "PARTIAL", "goal_unverified", None)
    assert body["revision"] == 1
    assert stop_report["completed"] == ["half"]
    assert_stop_is_sticky(agent_api, task["id"])


@pytest.mark.parametrize(
    "claim",
    [
        {"done": True},
        {"revision": "5", "done": True},
        {"revision": 5, "done": "true"},
        {"revision": True, "done": True},
        "done",
        [5, True],
        {"revision": 2**63, "done": True},
    ],
    ids=[
        "no revision",
        "revision as text",
        "done as text",
        "revision as bool",
        "a string",
        "a list",
        "revision too large to store",
    ],
)
def test_it_answers_goal_unverified_to_malformed_evidence(agent_api, claim):
    task = new_task(agent_api)

    body = finish(agent_api, task["id"], evidence=claim, answer="done")

    assert_stopped(body, "PARTIAL", "goal_unverified", None)
    assert body["revision"] == 0


def test_it_does_not_complete_on_evidence_older_than_the_task(agent_api):
    task = new_task(agent_api)
    execute(
        agent_api,
        task["id"],
        "search",
        {"q": "a"},
        result={"kind": "SUCCESS", "evidence": evidence(3)},
    )

    body = finish(agent_api, task["id"], evidence=evidence(2, done=True))

    assert_stopped(body, "PARTIAL", "goal_unverified", None)
    assert body["revision"] == 3
