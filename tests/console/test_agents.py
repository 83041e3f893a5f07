"""Agents: spend today, running tasks, the kill switch (operators too), tokens issued once and
revoked, allowed profiles (admins)."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from agents.guard import terms
from agents.models import Agent, AgentDay, ApiToken, Event, hash_token
from agents.services import runner
from tests.console.conftest import HTMX

PAUSE = "pause-agent-a-reason"


def test_it_lists_agents_with_spend_today_and_running_tasks(as_admin, looping_task, agent):
    AgentDay.objects.update_or_create(agent=agent, day=timezone.now().date(),
                                      defaults={"spent": Decimal("0.42")})  # fmt: skip
    page = as_admin.get("/agents/").content.decode()
    assert 'id="agent-agent-a"' in page
    assert "0.42 USD" in page
    assert 'href="/?agent=agent-a&amp;state=RUNNING">1</a>' in page


def test_pausing_stops_every_task_at_its_next_call(as_admin, looping_task, agent):
    response = as_admin.post("/agents/agent-a/pause/", {PAUSE: "runaway spend"})
    assert response.status_code == 303
    agent.refresh_from_db()
    assert (agent.paused, agent.paused_reason) == (True, "runaway spend")
    _, _, outcome = runner.tool_call_request(task_id=looping_task.pk, agent=agent, tool="t",
                                             args={}, effect=terms.READ)  # fmt: skip
    assert outcome.decision == terms.STOP
    looping_task.refresh_from_db()
    assert looping_task.reason == "agent_paused"
    page = as_admin.get("/agents/").content.decode()
    assert "runaway spend" in page and "Unpause" in page


def test_a_secret_in_the_pause_reason_is_masked_on_the_agents_page(as_admin, as_operator, agent):
    """The reason is an operator's note, read by every operator after: masked by the one
    redaction policy, as the audit log masks the same reason."""
    secret = "sk-live-abcdefghijklmnopqrstuvwxyz123456"
    answer = as_admin.post("/agents/agent-a/pause/", {PAUSE: f"key leaked: {secret}"}, **HTMX)
    assert answer.status_code == 200
    agent.refresh_from_db()
    assert agent.paused_reason == f"key leaked: {secret}"  # stored as typed
    for client in (as_admin, as_operator):
        for url in ("/agents/", "/agents/?open=agent-a", "/audit/"):
            page = client.get(url).content.decode()
            assert "key leaked: •••" in page, url
            assert secret not in page, url
    assert secret not in answer.content.decode()


def test_a_secret_in_a_token_name_is_masked_where_the_name_is_shown(as_admin, agent):
    """A token's name is free text an admin types (and may paste a key into): the card's
    notice and its token table show it through the redaction policy."""
    secret = "sk-live-abcdefghijklmnopqrstuvwxyz123456"
    answer = as_admin.post("/agents/agent-a/tokens/", {"token-agent-a-name": f"old {secret}"})
    assert answer.status_code == 200
    assert ApiToken.objects.filter(agent=agent, name=f"old {secret}").exists()  # stored as typed
    for page in (answer.content.decode(), as_admin.get("/agents/?open=agent-a").content.decode()):
        assert "old •••" in page
        assert secret not in page


def test_unpausing_takes_a_reason_too(as_admin, agent):
    as_admin.post("/agents/agent-a/pause/", {PAUSE: "x"})
    response = as_admin.post("/agents/agent-a/unpause/", {PAUSE: "fixed"}, **HTMX)
    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith('<article class="card agent-card"')
    agent.refresh_from_db()
    assert agent.paused is False
    assert Event.objects.filter(kind="agent_unpaused", reason="fixed").exists()


def test_a_pause_from_a_stale_tab_keeps_the_first_reason_and_says_so(as_admin, as_operator, agent):
    """Two people press the kill switch (or one tab was opened before the other's pause):
    the agent is paused once, with the first reason, and the second is told nothing changed."""
    assert as_operator.post("/agents/agent-a/pause/", {PAUSE: "runaway spend"}).status_code == 303
    response = as_admin.post("/agents/agent-a/pause/", {PAUSE: "me too"}, follow=True)
    assert "agent-a was already paused; nothing changed." in response.content.decode()
    agent.refresh_from_db()
    assert (agent.paused, agent.paused_reason) == (True, "runaway spend")
    assert Event.objects.filter(kind="agent_paused").count() == 1
    answer = as_admin.post("/agents/agent-a/pause/", {PAUSE: "me too"}, **HTMX)
    assert answer.status_code == 200
    assert '"kind": "info"' in answer["HX-Trigger"] and "already paused" in answer["HX-Trigger"]


def test_an_unpause_of_an_agent_not_paused_changes_and_logs_nothing(as_admin, agent):
    response = as_admin.post("/agents/agent-a/unpause/", {PAUSE: "stale tab"}, follow=True)
    assert "agent-a was not paused; nothing changed." in response.content.decode()
    assert not Event.objects.filter(kind="agent_unpaused").exists()


def test_a_pause_without_a_reason_shows_the_error_and_changes_nothing(as_admin, agent):
    response = as_admin.post("/agents/agent-a/pause/", {PAUSE: ""})
    assert response.status_code == 422
    assert 'id="id_pause-agent-a-reason_error">A reason is required.' in response.content.decode()
    agent.refresh_from_db()
    assert agent.paused is False
    assert not Event.objects.filter(kind="agent_paused").exists()


def test_an_unknown_agent_is_404(as_admin, db):
    assert as_admin.post("/agents/nobody/pause/", {"pause-nobody-reason": "x"}).status_code == 404


def test_a_new_token_is_shown_once_and_stored_hashed(as_admin, agent):
    response = as_admin.post("/agents/agent-a/tokens/", {"token-agent-a-name": "worker 2"})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    body = response.content.decode()
    raw = body.split('class="token-value" type="text" readonly value="')[1].split('"')[0]
    assert raw.startswith("lw_")
    token = ApiToken.objects.get(key_hash=hash_token(raw))
    assert (token.agent, token.name) == (agent, "worker 2")
    assert raw not in as_admin.get("/agents/").content.decode()
    # the token works against the API
    api = Client().get("/api/v1/tasks", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.status_code == 200
    assert Event.objects.filter(kind="token_issued", actor="user:adam").exists()


def test_htmx_gets_the_card_with_the_new_token(as_admin, agent):
    response = as_admin.post("/agents/agent-a/tokens/", {}, **HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<article class="card agent-card"')
    assert "Copy it now" in body


def test_a_too_long_token_name_is_refused(as_admin, agent):
    before = ApiToken.objects.count()
    response = as_admin.post("/agents/agent-a/tokens/", {"token-agent-a-name": "x" * 150})
    assert response.status_code == 422
    assert "At most 100 characters." in response.content.decode()
    assert ApiToken.objects.count() == before


def test_revoking_a_token_locks_it_out(as_admin, agent):
    token = ApiToken.objects.get(agent=agent)
    response = as_admin.post(f"/agents/agent-a/tokens/{token.pk}/revoke/")
    assert response.status_code == 303
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert Event.objects.filter(kind="token_revoked", actor="user:adam").count() == 1
    # again: nothing more happens
    as_admin.post(f"/agents/agent-a/tokens/{token.pk}/revoke/")
    assert Event.objects.filter(kind="token_revoked").count() == 1


def test_a_revoke_from_a_stale_tab_says_the_token_was_already_revoked(as_admin, agent):
    token = ApiToken.objects.get(agent=agent)
    as_admin.post(f"/agents/agent-a/tokens/{token.pk}/revoke/")
    revoked_at = ApiToken.objects.get(pk=token.pk).revoked_at
    again = as_admin.post(f"/agents/agent-a/tokens/{token.pk}/revoke/", follow=True)
    assert f"Token {token.prefix}… was already revoked; nothing changed." in again.content.decode()
    answer = as_admin.post(f"/agents/agent-a/tokens/{token.pk}/revoke/", **HTMX)
    assert '"kind": "info"' in answer["HX-Trigger"]
    assert ApiToken.objects.get(pk=token.pk).revoked_at == revoked_at


def test_a_token_of_another_agent_is_404(as_admin, agent, make_agent):
    _, _ = make_agent("agent-b", namespace="ns-b")
    other = ApiToken.objects.get(agent__name="agent-b")
    assert as_admin.post(f"/agents/agent-a/tokens/{other.pk}/revoke/").status_code == 404
    other.refresh_from_db()
    assert other.revoked_at is None


def test_an_operator_may_not_issue_tokens_or_grant_profiles(as_operator, agent):
    assert as_operator.post("/agents/agent-a/tokens/", {}).status_code == 403
    profiles = {"profiles-agent-a-reason": "x"}
    assert as_operator.post("/agents/agent-a/profiles/", profiles).status_code == 403
    assert ApiToken.objects.filter(agent=agent).count() == 1
    assert not agent.allowed_profiles.exists()


def test_an_admin_grants_profiles_on_the_agents_page(as_admin, agent):
    from agents.models import LimitProfile

    LimitProfile.objects.create(name="loose", max_model_calls=1000)
    LimitProfile.objects.create(name="tight", max_model_calls=3)
    page = as_admin.get("/agents/").content.decode()
    assert 'name="profiles-agent-a-allowed"' in page

    response = as_admin.post("/agents/agent-a/profiles/", {"profiles-agent-a-allowed": ["loose"]},
                             **HTMX)  # fmt: skip

    assert response.status_code == 200
    assert list(agent.allowed_profiles.values_list("name", flat=True)) == ["loose"]
    assert Event.objects.filter(kind="agent_profiles_changed").exists()


def test_an_operator_cannot_grant_profiles(as_operator, agent):
    from agents.models import LimitProfile

    LimitProfile.objects.create(name="loose")
    response = as_operator.post(
        "/agents/agent-a/profiles/", {"profiles-agent-a-allowed": ["loose"]}
    )
    assert response.status_code == 403
    assert not agent.allowed_profiles.exists()


def test_an_operator_pauses_an_agent_but_sees_no_tokens_or_profiles(as_operator, looping_task):
    page = as_operator.get("/agents/").content.decode()
    assert 'id="agent-agent-a"' in page
    assert "Pause every task" in page
    assert "API tokens" not in page and "Save allowed profiles" not in page

    response = as_operator.post("/agents/agent-a/pause/", {PAUSE: "runaway spend"})

    assert response.status_code == 303
    looping_task.agent.refresh_from_db()
    assert looping_task.agent.paused is True


@pytest.mark.parametrize("name", ["bot.v2", "support bot", "bøt", "a" * 65, ""])
def test_create_agent_refuses_a_name_the_agents_page_cannot_link(as_admin, agent, name):
    """Agent names are slugs (the console's agent URLs take nothing else): a name that is not
    one made /agents/ answer 500 for everyone, so the command refuses it and creates nothing."""
    tokens = ApiToken.objects.count()
    with pytest.raises(CommandError, match="letters, numbers, hyphens or underscores"):
        call_command("create_agent", name, stdout=StringIO())
    assert list(Agent.objects.values_list("name", flat=True)) == ["agent-a"]
    assert ApiToken.objects.count() == tokens
    assert as_admin.get("/agents/").status_code == 200
