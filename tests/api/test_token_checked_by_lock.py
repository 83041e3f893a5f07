"""The four decisions (gate, usage, tool request, result) check their agent token in the task
lock's statement instead of looking it up first (`agents.api.auth.TokenCheckedByLock`). Every
answer must be what the lookup before the view gave: a token that does not authenticate answers
401 before any other answer, an operator's token 403, another agent's task 404, and nothing
changes on the way."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.api.auth import TOUCH_SECONDS
from agents.models import ApiToken
from tests.conftest import Caller

from .helpers import gate, new_task, request_tool, row_counts, settle

pytestmark = pytest.mark.django_db


@pytest.fixture
def decisions(agent_api):
    """One of each decision's path on a running task, with a body that is valid and one that
    is not: (path, valid body, invalid body)."""
    task = new_task(agent_api)["id"]
    model_call = gate(agent_api, task, model="m")["model_call"]
    tool_call = request_tool(agent_api, task, "search", {"q": 1})["tool_call"]
    return task, [
        (f"tasks/{task}/model-calls", {"model": "m"}, {"model": 5}),
        (f"tasks/{task}/model-calls/{model_call}/usage",
         {"prompt_tokens": 1, "completion_tokens": 1}, {"prompt_tokens": "many"}),
        (f"tasks/{task}/tool-calls", {"tool": "search", "args": {"q": 2}, "effect": "read"},
         {"tool": "search", "args": [], "effect": "read"}),
        (f"tasks/{task}/tool-calls/{tool_call}/result", {"kind": "SUCCESS"}, {"kind": 7}),
    ]  # fmt: skip


def unauthenticated(response) -> bool:
    return (
        response.status_code == 401
        and response.body["error"]["code"] == "UNAUTHENTICATED"
        and response["WWW-Authenticate"] == "Bearer"
    )


def test_an_unknown_token_answers_401_whatever_the_body_or_the_task(client, decisions):
    task, paths = decisions
    stranger = Caller(client, "lw_not-a-real-token")
    before = row_counts()

    for path, valid, invalid in paths:
        assert unauthenticated(stranger.post(path, valid)), path
        assert unauthenticated(stranger.post(path, invalid)), path
        assert unauthenticated(stranger.post(path, raw="{not json")), path
        elsewhere = path.replace(task, "00000000-0000-4000-8000-000000000000")
        assert unauthenticated(stranger.post(elsewhere, valid)), path
        assert unauthenticated(stranger.post(path.replace(task, "not-a-uuid"), valid)), path

    assert row_counts() == before


def test_a_token_revoked_after_use_answers_401_at_once(agent_api, decisions):
    _task, paths = decisions
    ApiToken.objects.update(revoked_at=timezone.now())
    before = row_counts()

    for path, valid, _invalid in paths:
        assert unauthenticated(agent_api.post(path, valid)), path

    assert row_counts() == before


def test_an_operators_token_answers_403_agent_token_required(operator_api, decisions):
    _task, paths = decisions
    before = row_counts()

    for path, valid, invalid in paths:
        for body in (valid, invalid):
            response = operator_api.post(path, body)
            assert response.status_code == 403, (path, response.body)
            assert response.body["error"]["code"] == "AGENT_TOKEN_REQUIRED"

    assert row_counts() == before


def test_an_inactive_operators_token_answers_401(operator_api, decisions, django_user_model):
    _task, paths = decisions
    django_user_model.objects.filter(username="olivia").update(is_active=False)

    for path, valid, _invalid in paths:
        assert unauthenticated(operator_api.post(path, valid)), path


def test_another_agents_token_answers_404_and_its_own_bad_body_400(
    agent_api, other_agent_api, decisions
):
    _task, paths = decisions
    before = row_counts()

    for path, valid, invalid in paths:
        response = other_agent_api.post(path, valid)
        assert response.status_code == 404, (path, response.body)
        assert response.body["error"]["code"] == "TASK_NOT_FOUND"
        # The agent's own token and a body the serializer refuses: the token is good, so 400.
        assert agent_api.post(path, invalid).status_code == 400, path

    assert row_counts() == before


def test_a_second_token_of_the_agent_decides_as_the_first(agent_api, agent, client, decisions):
    task, _paths = decisions
    raw, key_hash, prefix = ApiToken.generate()
    ApiToken.objects.create(agent=agent[1], key_hash=key_hash, prefix=prefix)
    second = Caller(client, raw)

    allowed = gate(second, task, model="m")

    assert allowed["decision"] == "ALLOW"
    assert settle(second, task, allowed["model_call"])["decision"] == "CONTINUE"


def test_a_decision_records_the_tokens_use_once_a_minute(agent_api, decisions):
    task, _paths = decisions
    stale = timezone.now() - timedelta(seconds=TOUCH_SECONDS + 5)
    ApiToken.objects.update(last_used_at=stale)

    gate(agent_api, task, model="m")
    touched = ApiToken.objects.get().last_used_at
    gate(agent_api, task, model="m")

    assert touched > stale
    assert ApiToken.objects.get().last_used_at == touched  # fresh: not written again


def test_a_throttled_unknown_token_answers_401(client, decisions, settings):
    _task, paths = decisions
    settings.API_THROTTLE_RATE = "1/min"
    stranger = Caller(client, "lw_not-a-real-token")

    for path, valid, _invalid in paths * 2:
        assert unauthenticated(stranger.post(path, valid)), path


def test_options_on_a_decision_endpoint_looks_the_token_up_first(client, agent_api, decisions):
    _task, paths = decisions
    stranger = Caller(client, "lw_not-a-real-token")

    for path, _valid, _invalid in paths:
        assert agent_api._call("options", path).status_code == 200, path  # was a 500
        assert unauthenticated(stranger._call("options", path)), path
