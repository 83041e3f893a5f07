"""Who may do what: agents run their own tasks, operators stop/reconcile/resume and pause
agents (the kill switch), admins also set limits and manage profiles; a user without a role
may do nothing."""

from __future__ import annotations

import pytest

from agents.models import Agent, LimitProfile
from ledger.models import Operation

from .helpers import get_task, new_task, report, request_tool, row_counts

pytestmark = pytest.mark.django_db


@pytest.fixture
def stopped_task(agent_api):
    """A task with an UNKNOWN write: something to resume, reconcile and change."""
    task = new_task(agent_api)
    asked = request_tool(agent_api, task["id"], "send", {"to": "x"}, "write", operation_key="k1")
    report(agent_api, task["id"], asked["tool_call"], "NO_RESULT")
    LimitProfile.objects.create(name="existing")
    return task


def operator_calls(task_id: str, operation_id: int) -> list[tuple[str, str, dict | None]]:
    """Every operator and admin endpoint, with a body that would be valid."""
    return [
        ("get", "tasks", None),
        ("get", f"tasks/{task_id}", None),
        ("get", f"tasks/{task_id}/trace", None),
        ("post", f"tasks/{task_id}/stop", {"reason": "x"}),
        ("post", f"tasks/{task_id}/resume", {"reason": "x"}),
        ("patch", f"tasks/{task_id}/limits", {"max_model_calls": 50}),
        ("get", "operations", None),
        ("get", f"operations/{operation_id}", None),
        ("post", f"operations/{operation_id}/reconcile", {"verdict": "COMMITTED", "note": "x"}),
        ("post", "agents/agent-a/pause", {"reason": "x"}),
        ("post", "agents/agent-a/unpause", {"reason": "x"}),
        ("get", "profiles", None),
        ("post", "profiles", {"name": "new-profile"}),
        ("get", "profiles/existing", None),
        ("patch", "profiles/existing", {"max_model_calls": 3}),
        ("delete", "profiles/existing", None),
        ("get", "audit", None),
    ]


def call(api, method, path, body):
    if method == "get":
        return api.get(path)
    if method == "delete":
        return api.delete(path)
    return getattr(api, method)(path, body)


def test_it_refuses_every_operator_endpoint_to_a_user_without_a_role(outsider_api, stopped_task):
    operation = Operation.objects.get()
    before = row_counts()

    for method, path, body in operator_calls(stopped_task["id"], operation.pk):
        response = call(outsider_api, method, path, body)
        assert response.status_code == 403, (method, path, response.body)
        assert response.body["error"]["code"] == "FORBIDDEN"

    assert row_counts() == before
    assert Operation.objects.get().state == "UNKNOWN"
    assert LimitProfile.objects.filter(name="existing").exists()


def test_it_refuses_the_runner_endpoints_to_users(outsider_api, operator_api, stopped_task):
    task_id = stopped_task["id"]
    for api in (outsider_api, operator_api):
        for path, body in [
            ("tasks", {"goal": "x"}),
            (f"tasks/{task_id}/model-calls", {}),
            (f"tasks/{task_id}/tool-calls", {"tool": "t", "args": {}, "effect": "read"}),
            (f"tasks/{task_id}/finish", {}),
        ]:
            response = api.post(path, body)
            assert response.status_code == 403, (path, response.body)
            assert response.body["error"]["code"] == "AGENT_TOKEN_REQUIRED"


def test_it_refuses_operator_actions_to_agent_tokens(agent_api, stopped_task):
    operation = Operation.objects.get()
    before = row_counts()
    task_id = stopped_task["id"]

    for method, path, body in [
        ("post", f"tasks/{task_id}/resume", {"reason": "x"}),
        ("patch", f"tasks/{task_id}/limits", {"max_model_calls": 50}),
        ("post", f"operations/{operation.pk}/reconcile", {"verdict": "COMMITTED", "note": "x"}),
        ("post", "agents/agent-a/pause", {"reason": "x"}),
        ("post", "agents/agent-a/unpause", {"reason": "x"}),
        ("get", "profiles", None),
        ("post", "profiles", {"name": "mine"}),
        ("patch", "profiles/existing", {"max_model_calls": 1000}),
        ("delete", "profiles/existing", None),
        ("get", "audit", None),
    ]:
        response = call(agent_api, method, path, body)
        assert response.status_code == 403, (method, path, response.body)

    assert row_counts() == before
    assert get_task(agent_api, task_id)["state"] == "NEEDS_HUMAN"
    assert Agent.objects.get(name="agent-a").paused is False


def test_it_refuses_admin_actions_to_an_operator(operator_api, stopped_task):
    task_id = stopped_task["id"]
    before = row_counts()

    for method, path, body in [
        ("patch", f"tasks/{task_id}/limits", {"max_model_calls": 50}),
        ("post", "profiles", {"name": "new-profile"}),
        ("patch", "profiles/existing", {"max_model_calls": 3}),
        ("delete", "profiles/existing", None),
    ]:
        response = call(operator_api, method, path, body)
        assert response.status_code == 403, (method, path, response.body)

    assert row_counts() == before
    assert LimitProfile.objects.get(name="existing").max_model_calls == 20


def test_it_lets_an_operator_view_stop_reconcile_and_resume(operator_api, stopped_task):
    task_id = stopped_task["id"]
    operation = Operation.objects.get()

    assert operator_api.get("tasks").status_code == 200
    assert operator_api.get(f"tasks/{task_id}/trace").status_code == 200
    assert operator_api.get("profiles").status_code == 200
    assert operator_api.get("operations").status_code == 200
    reconciled = operator_api.post(
        f"operations/{operation.pk}/reconcile", {"verdict": "NOT_COMMITTED", "note": "checked"}
    )
    assert reconciled.status_code == 200
    assert operator_api.post(f"tasks/{task_id}/resume", {"reason": "ok"}).status_code == 200
    assert operator_api.post(f"tasks/{task_id}/stop", {"reason": "x"}).status_code == 200


def test_it_lets_an_agent_see_only_its_own_tasks(agent_api, other_agent_api, operator_api):
    ours = new_task(agent_api)
    theirs = new_task(other_agent_api)

    assert [t["id"] for t in agent_api.get("tasks").body["tasks"]] == [ours["id"]]
    assert [t["id"] for t in other_agent_api.get("tasks").body["tasks"]] == [theirs["id"]]
    listed = {t["id"] for t in operator_api.get("tasks").body["tasks"]}
    assert listed == {ours["id"], theirs["id"]}
    filtered = operator_api.get("tasks?agent=agent-b").body["tasks"]
    assert [t["id"] for t in filtered] == [theirs["id"]]


def test_an_operator_pulls_and_lifts_the_agent_kill_switch(operator_api, agent_api):
    """docs/DESIGN.md lists pause and unpause among the operator endpoints: the people watching the
    tasks at night can stop a runaway agent without an admin."""
    task = new_task(agent_api)

    paused = operator_api.post("agents/agent-a/pause", {"reason": "runaway spend"})

    assert paused.status_code == 200, paused.body
    assert paused.body["paused"] is True
    assert gate_state(agent_api, task["id"]) == ("STOP", "agent_paused")
    unpaused = operator_api.post("agents/agent-a/unpause", {"reason": "fixed"})
    assert unpaused.status_code == 200, unpaused.body
    assert Agent.objects.get(name="agent-a").paused is False


def gate_state(api, task_id):
    answer = api.post(f"tasks/{task_id}/model-calls", {})
    return answer.body["decision"], answer.body.get("reason")
