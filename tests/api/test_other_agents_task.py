"""Another agent's task answers 404 on every task endpoint, and nothing changes."""

from __future__ import annotations

import pytest

from .helpers import gate, get_task, new_task, request_tool, row_counts, snapshot

pytestmark = pytest.mark.django_db


def test_it_answers_404_on_every_task_endpoint_for_another_agents_task(agent_api, other_agent_api):
    task = new_task(agent_api)
    tid = task["id"]
    model_call = gate(agent_api, tid)["model_call"]
    tool_call = request_tool(agent_api, tid, "search", {"q": "x"})["tool_call"]
    before, counts = snapshot(agent_api, tid), row_counts()

    for method, path, body in [
        ("get", f"tasks/{tid}", None),
        ("get", f"tasks/{tid}/trace", None),
        ("post", f"tasks/{tid}/model-calls", {}),
        (
            "post",
            f"tasks/{tid}/model-calls/{model_call}/usage",
            {"prompt_tokens": 1, "completion_tokens": 1},
        ),
        ("post", f"tasks/{tid}/tool-calls", {"tool": "search", "args": {}, "effect": "read"}),
        ("post", f"tasks/{tid}/tool-calls/{tool_call}/result", {"kind": "SUCCESS"}),
        ("post", f"tasks/{tid}/finish", {"evidence": {"revision": 1, "done": True}}),
        ("post", f"tasks/{tid}/stop", {"reason": "mine now"}),
    ]:
        response = (
            other_agent_api.get(path) if method == "get" else other_agent_api.post(path, body)
        )
        assert response.status_code == 404, (path, response.body)
        assert response.body["error"]["code"] == "TASK_NOT_FOUND"

    assert snapshot(agent_api, tid) == before
    assert row_counts() == counts
    assert get_task(agent_api, tid)["state"] == "RUNNING"


def test_it_answers_404_for_a_task_that_does_not_exist(agent_api, operator_api):
    for task_id in ("00000000-0000-0000-0000-000000000000", "not-a-uuid"):
        assert agent_api.get(f"tasks/{task_id}").status_code == 404
        assert agent_api.post(f"tasks/{task_id}/model-calls", {}).status_code == 404
        assert agent_api.post(f"tasks/{task_id}/stop", {}).status_code == 404
        assert operator_api.get(f"tasks/{task_id}").status_code == 404
        assert operator_api.post(f"tasks/{task_id}/stop", {}).status_code == 404


def test_it_answers_404_for_a_call_id_of_another_task(agent_api):
    first, second = new_task(agent_api), new_task(agent_api)
    model_call = gate(agent_api, first["id"])["model_call"]
    tool_call = request_tool(agent_api, first["id"], "search", {"q": "x"})["tool_call"]

    usage = agent_api.post(
        f"tasks/{second['id']}/model-calls/{model_call}/usage",
        {"prompt_tokens": 1, "completion_tokens": 1},
    )
    result = agent_api.post(
        f"tasks/{second['id']}/tool-calls/{tool_call}/result", {"kind": "SUCCESS"}
    )
    linked = agent_api.post(
        f"tasks/{second['id']}/tool-calls",
        {"tool": "s", "args": {}, "effect": "read", "model_call": model_call},
    )

    assert (usage.status_code, usage.body["error"]["code"]) == (404, "MODEL_CALL_NOT_FOUND")
    assert (result.status_code, result.body["error"]["code"]) == (404, "TOOL_CALL_NOT_FOUND")
    assert (linked.status_code, linked.body["error"]["code"]) == (404, "MODEL_CALL_NOT_FOUND")
    assert get_task(agent_api, second["id"])["usage"]["tool_requests"] == 0
