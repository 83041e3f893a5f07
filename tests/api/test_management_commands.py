"""create_agent and create_operator print a working API token as the last line of stdout."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.models import Agent, LimitProfile
from tests.conftest import Caller

pytestmark = pytest.mark.django_db


def last_line(command, *args, **options) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out, **options)
    return out.getvalue().strip().splitlines()[-1]


def test_create_agent_prints_a_token_that_runs_tasks(client):
    LimitProfile.objects.create(name="tight", max_model_calls=3)

    token = last_line(
        "create_agent", "billing-bot", namespace="billing", profile="tight", daily_cap="2.50"
    )

    agent = Agent.objects.get(name="billing-bot")
    assert (agent.namespace, agent.daily_cost_cap) == ("billing", Decimal("2.50"))
    api = Caller(client, token)
    created = api.post("tasks", {"goal": "x"})
    assert created.status_code == 201
    assert created.body["agent"] == "billing-bot"
    assert created.body["limits"]["max_model_calls"] == 3


def test_create_agent_keeps_the_namespace_that_holds_the_agents_writes(client):
    """A write committed in one namespace is unknown in another: moving the agent would let
    the same payment run again."""
    api = Caller(client, last_line("create_agent", "billing-bot", namespace="billing"))
    task = api.post("tasks", {"goal": "pay"}).body["id"]
    write = {"tool": "pay", "args": {"invoice": 7}, "effect": "write", "operation_key": "pay-7"}
    assert api.post(f"tasks/{task}/tool-calls", write).body["decision"] == "EXECUTE"

    with pytest.raises(CommandError, match="billing"):
        call_command("create_agent", "billing-bot", namespace="billing-v2", stdout=StringIO())

    assert Agent.objects.get(name="billing-bot").namespace == "billing"
    again = api.post("tasks", {"goal": "pay again"}).body["id"]
    assert api.post(f"tasks/{again}/tool-calls", write).body["decision"] != "EXECUTE"


def test_create_agent_defaults_the_namespace_to_the_name(client):
    last_line("create_agent", "solo")

    assert Agent.objects.get(name="solo").namespace == "solo"


def test_create_agent_refuses_a_bad_daily_cap():
    with pytest.raises(CommandError):
        call_command("create_agent", "x", daily_cap="lots", stdout=StringIO())
    with pytest.raises(CommandError):
        call_command("create_agent", "x", profile="missing", stdout=StringIO())


@pytest.mark.parametrize("cap", ["NaN", "Infinity", "1e30", "0.0000001"])
def test_create_agent_refuses_a_daily_cap_the_column_cannot_hold(cap):
    with pytest.raises(CommandError, match="--daily-cap"):
        call_command("create_agent", "x", daily_cap=cap, stdout=StringIO())

    assert not Agent.objects.exists()


def test_create_operator_prints_a_token_with_operator_rights(client):
    token = last_line("create_operator", "ops1", password="pw")

    api = Caller(client, token)
    assert api.get("tasks").status_code == 200
    assert api.get("operations").status_code == 200
    assert api.post("profiles", {"name": "p"}).status_code == 403


def test_create_operator_with_admin_prints_a_token_with_admin_rights(client):
    token = last_line("create_operator", "boss", admin=True)

    api = Caller(client, token)
    assert api.post("profiles", {"name": "p"}).status_code == 201


def test_create_operator_for_an_existing_admin_keeps_it_an_admin(client, django_user_model):
    last_line("create_operator", "boss", admin=True)
    out = StringIO()

    call_command("create_operator", "boss", stdout=out)  # a new token, nothing else

    token = out.getvalue().strip().splitlines()[-1]
    assert out.getvalue().startswith("updated admin boss")
    assert Caller(client, token).post("profiles", {"name": "p"}).status_code == 201
    assert django_user_model.objects.get(username="boss").is_staff  # the Django admin too


def test_each_run_issues_a_new_token_and_keeps_the_old_one(client):
    first = last_line("create_agent", "bot")
    second = last_line("create_agent", "bot")

    assert first != second
    assert Caller(client, first).get("tasks").status_code == 200
    assert Caller(client, second).get("tasks").status_code == 200


@pytest.mark.parametrize("namespace", ["n" * 101, "ns\x00x"], ids=["too_long", "nul"])
def test_create_agent_refuses_a_namespace_the_database_cannot_hold(namespace):
    """A namespace past its column (or with a NUL) failed inside the command with a database
    error on PostgreSQL (SQLite kept what the column says it cannot). Nothing is created."""
    with pytest.raises(CommandError, match="namespace"):
        call_command("create_agent", "ns-bot", namespace=namespace, stdout=StringIO())
    assert not Agent.objects.filter(name="ns-bot").exists()


@pytest.mark.parametrize(
    "username", ["", "u" * 151, "bob smith", "ops\x00x"], ids=["empty", "too_long", "space", "nul"]
)
def test_create_operator_refuses_a_username_the_sign_in_does_not_take(username, django_user_model):
    with pytest.raises(CommandError, match="username"):
        call_command("create_operator", username, password="pw", stdout=StringIO())

    assert not django_user_model.objects.exists()
