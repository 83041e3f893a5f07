"""An operator's resume: a new phase on top of the consumed usage, limits raised by the grant."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.models import Event, Phase, Task

from .helpers import (
    assert_stopped,
    evidence,
    execute,
    gate,
    get_task,
    new_task,
    request_tool,
    settle,
)

pytestmark = pytest.mark.django_db


def resume(api, task_id, reason="checked the plan", **grant):
    body = {"reason": reason}
    if grant:
        body["grant"] = grant
    return api.post(f"tasks/{task_id}/resume", body)


def spend_two_model_calls(agent_api):
    task = new_task(agent_api, limits={"max_model_calls": 2})
    for _ in range(2):
        settle(agent_api, task["id"], gate(agent_api, task["id"])["model_call"])
    assert_stopped(gate(agent_api, task["id"]), "PARTIAL", "model_budget", "GUARD_ROUND_LIMIT")
    return task


def test_it_starts_phase_two_with_the_usage_kept_and_limits_raised(agent_api, operator_api):
    task = spend_two_model_calls(agent_api)
    before = get_task(agent_api, task["id"])

    # An operator may grant at most the original limit per budget: 2 model calls here.
    response = resume(operator_api, task["id"], model_calls=2, seconds=600, cost="1.50")

    assert response.status_code == 200, response.body
    body = response.body
    assert (body["state"], body["reason"], body["report"]) == ("RUNNING", None, None)
    assert body["phase"] == 2
    assert body["usage"] == before["usage"]
    assert body["limits"]["max_model_calls"] == 4
    assert body["limits"]["deadline_seconds"] == 900 + 600
    assert Decimal(body["limits"]["max_cost"]) == Decimal("6.50")
    assert body["remaining"]["model_calls"] == 2
    moved = datetime.fromisoformat(body["deadline_at"]) - datetime.fromisoformat(
        before["deadline_at"]
    )
    assert moved.total_seconds() == 600
    phase = Phase.objects.get(task_id=task["id"], number=2)
    assert phase.reason == "checked the plan"
    assert phase.started_by.username == "olivia"
    assert Phase.objects.get(task_id=task["id"], number=1).end_reason == "model_budget"
    assert Event.objects.filter(task_id=task["id"], kind="task_resumed").count() == 1

    allowed = gate(agent_api, task["id"])
    assert (allowed["decision"], allowed["round"]) == ("ALLOW", 3)


def test_it_stops_again_when_the_grant_is_used_up(agent_api, operator_api):
    task = spend_two_model_calls(agent_api)
    resume(operator_api, task["id"], model_calls=1)
    settle(agent_api, task["id"], gate(agent_api, task["id"])["model_call"])

    answer = gate(agent_api, task["id"])

    stop_report = assert_stopped(answer, "PARTIAL", "model_budget", "GUARD_ROUND_LIMIT")
    assert stop_report["phase"] == 2
    assert stop_report["usage"]["model_calls"] == 3


def test_it_remembers_the_looping_call_after_a_resume(agent_api, operator_api):
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "x"})
    execute(agent_api, task["id"], "search", {"q": "x"})
    request_tool(agent_api, task["id"], "search", {"q": "x"})
    request_tool(agent_api, task["id"], "search", {"q": "x"})
    assert get_task(agent_api, task["id"])["reason"] == "same_call"
    resume(operator_api, task["id"], tool_requests=5)

    answer = request_tool(agent_api, task["id"], "search", {"q": "x"})

    assert_stopped(answer, "PARTIAL", "same_call", "GUARD_LOOP_DETECTED")
    assert answer["report"]["phase"] == 2


def test_it_starts_counting_stagnant_steps_again(agent_api, operator_api):
    task = new_task(agent_api)
    for n in range(3):
        execute(agent_api, task["id"], "search", {"q": str(n)})
    assert get_task(agent_api, task["id"])["reason"] == "no_progress"

    body = resume(operator_api, task["id"]).body

    assert body["stagnant"] == 0
    execute(agent_api, task["id"], "search", {"q": "new idea"})
    assert get_task(agent_api, task["id"])["state"] == "RUNNING"


def test_it_refuses_to_resume_a_running_task(agent_api, operator_api):
    task = new_task(agent_api)

    response = resume(operator_api, task["id"])

    assert response.status_code == 409
    assert response.body["error"]["code"] == "TASK_RUNNING"
    assert get_task(agent_api, task["id"])["phase"] == 1


def test_it_refuses_to_resume_a_completed_task(agent_api, operator_api):
    task = new_task(agent_api)
    agent_api.post(f"tasks/{task['id']}/finish", {"evidence": evidence(1, done=True)})

    response = resume(operator_api, task["id"])

    assert response.status_code == 409
    assert response.body["error"]["code"] == "TASK_COMPLETED"
    assert "completed" in response.body["error"]["message"]
    body = get_task(agent_api, task["id"])
    assert (body["state"], body["phase"]) == ("COMPLETED", 1)


def test_it_refuses_to_resume_while_a_write_is_in_flight(agent_api, operator_api):
    task = new_task(agent_api)
    request_tool(
        agent_api, task["id"], "send_email", {"to": "x"}, "write", operation_key="notice-1"
    )
    operator_api.post(f"tasks/{task['id']}/stop", {"reason": "runaway"})

    response = resume(operator_api, task["id"])

    assert response.status_code == 409
    assert response.body["error"]["code"] == "OPERATIONS_UNRESOLVED"
    assert "notice-1" in response.body["error"]["message"]
    assert get_task(agent_api, task["id"])["state"] == "STOPPED"


def test_it_requires_a_reason(agent_api, operator_api):
    task = spend_two_model_calls(agent_api)

    for body in ({}, {"reason": ""}, {"reason": "   "}):
        response = operator_api.post(f"tasks/{task['id']}/resume", body)
        assert response.status_code == 400, body
        assert "reason" in response.body["error"]["fields"]

    assert get_task(agent_api, task["id"])["state"] == "PARTIAL"


def test_it_answers_404_for_an_unknown_task(operator_api):
    response = resume(operator_api, "00000000-0000-0000-0000-000000000000")

    assert response.status_code == 404
    assert resume(operator_api, "not-a-uuid").status_code == 404


def waited_past_its_deadline(agent_api, seconds_ago: int = 3600) -> dict:
    """A task stopped by its budget, whose deadline then passed while it waited for a person."""
    task = spend_two_model_calls(agent_api)
    Task.objects.filter(pk=task["id"]).update(
        deadline_at=timezone.now() - timedelta(seconds=seconds_ago)
    )
    return task


def test_a_resume_that_leaves_the_deadline_past_is_refused_naming_the_seconds(
    agent_api, operator_api
):
    task = waited_past_its_deadline(agent_api)
    before = get_task(agent_api, task["id"])

    response = resume(operator_api, task["id"], model_calls=2)

    assert response.status_code == 409, response.body
    error = response.body["error"]
    assert error["code"] == "DEADLINE_PASSED"
    needed = error["fields"]["seconds_needed"]
    assert isinstance(needed, int) and 3601 <= needed <= 3700
    assert f"{needed} seconds" in error["message"]
    assert "grant.seconds" in error["fields"]
    assert get_task(agent_api, task["id"]) == before
    assert not Event.objects.filter(task_id=task["id"], kind="task_resumed").exists()


def test_a_resume_granting_the_seconds_needed_and_more_runs_again(agent_api, operator_api):
    task = waited_past_its_deadline(agent_api, seconds_ago=300)  # within an operator's bound
    needed = resume(operator_api, task["id"], model_calls=2).body["error"]["fields"][
        "seconds_needed"
    ]

    response = resume(operator_api, task["id"], model_calls=2, seconds=needed + 300)

    assert response.status_code == 200, response.body
    assert gate(agent_api, task["id"])["decision"] == "ALLOW"


@pytest.mark.parametrize(
    ("dimension", "amount", "limit"),
    [("model_calls", 1, "max_model_calls"), ("tool_requests", 1, "max_tool_requests"),
     ("tool_executions", 1, "max_tool_executions"), ("retries", 1, "max_retries"),
     ("polls", 1, "max_polls"), ("tokens", 1, "max_tokens"), ("cost", "0.25", "max_cost"),
     ("seconds", 1, "deadline_seconds")],
)  # fmt: skip
def test_each_grant_raises_its_own_limit_and_no_other(agent_api, operator_api, dimension,
                                                      amount, limit):  # fmt: skip
    task = new_task(agent_api)
    execute(agent_api, task["id"], "search", {"q": "x"})
    agent_api.post(f"tasks/{task['id']}/stop", {"reason": "pause"})
    before = get_task(agent_api, task["id"])

    body = resume(operator_api, task["id"], **{dimension: amount}).body

    raised = {k: v for k, v in body["limits"].items() if v != before["limits"][k]}
    assert list(raised) == [limit]
    assert Decimal(str(raised[limit])) == Decimal(str(before["limits"][limit])) + Decimal(
        str(amount)
    )
    assert body["usage"] == before["usage"]
