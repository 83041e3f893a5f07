"""A non-admin operator's resume grant is bounded: per resume, per budget, at most the task's
original limit (issue 8, hole 5). Admins may grant more."""

from __future__ import annotations

import pytest

from agents.models import Phase

from .helpers import assert_stopped, gate, new_task, settle

pytestmark = pytest.mark.django_db


def stopped_task(agent_api):
    task = new_task(agent_api, limits={"max_model_calls": 2})
    for _ in range(2):
        settle(agent_api, task["id"], gate(agent_api, task["id"])["model_call"])
    assert_stopped(gate(agent_api, task["id"]), "PARTIAL", "model_budget", "GUARD_ROUND_LIMIT")
    return task


def resume(api, task_id, **grant):
    return api.post(f"tasks/{task_id}/resume", {"reason": "more room", "grant": grant})


def test_it_refuses_an_operators_grant_above_the_original_limit(agent_api, operator_api):
    task = stopped_task(agent_api)

    response = resume(operator_api, task["id"], model_calls=2_147_483_647, cost="99999999")

    assert response.status_code == 403, response.body
    assert response.body["error"]["code"] == "GRANT_ABOVE_BOUND"
    assert set(response.body["error"]["fields"]) == {"grant.model_calls", "grant.cost"}
    assert not Phase.objects.filter(task_id=task["id"], number=2).exists()


def test_it_accepts_an_operators_grant_up_to_the_original_limit(agent_api, operator_api):
    task = stopped_task(agent_api)

    response = resume(operator_api, task["id"], model_calls=2, cost="5.00", seconds=900)

    assert response.status_code == 200, response.body
    assert response.body["limits"]["max_model_calls"] == 4


def test_it_bounds_each_resume_by_the_original_limit_not_the_raised_one(agent_api, operator_api):
    task = stopped_task(agent_api)
    assert resume(operator_api, task["id"], model_calls=2).status_code == 200
    for _ in range(2):
        settle(agent_api, task["id"], gate(agent_api, task["id"])["model_call"])
    gate(agent_api, task["id"])

    response = resume(operator_api, task["id"], model_calls=3)

    assert response.status_code == 403
    assert response.body["error"]["code"] == "GRANT_ABOVE_BOUND"


def test_it_lets_an_admin_grant_more(agent_api, admin_api):
    task = stopped_task(agent_api)

    response = resume(admin_api, task["id"], model_calls=1000)

    assert response.status_code == 200, response.body
    assert response.body["limits"]["max_model_calls"] == 1002
