"""Model-call budgets: calls, tokens, cost and the agent's daily cap refuse the next paid call
before it is made."""

from __future__ import annotations

import pytest

from tests.conftest import Caller

from .helpers import assert_stop_is_sticky, assert_stopped, gate, get_task, new_task, settle

pytestmark = pytest.mark.django_db


def test_it_refuses_the_model_call_past_max_model_calls(agent_api):
    task = new_task(agent_api, limits={"max_model_calls": 2})
    for expected_round in (1, 2):
        allowed = gate(agent_api, task["id"])
        assert allowed["decision"] == "ALLOW"
        assert allowed["round"] == expected_round
        settle(agent_api, task["id"], allowed["model_call"])

    answer = gate(agent_api, task["id"])

    stop_report = assert_stopped(answer, "PARTIAL", "model_budget", "GUARD_ROUND_LIMIT")
    assert stop_report["usage"]["model_calls"] == 2
    assert stop_report["remaining"]["model_calls"] == 0
    assert get_task(agent_api, task["id"])["usage"]["model_calls"] == 2
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_refuses_the_model_call_once_the_tokens_are_used(agent_api):
    task = new_task(agent_api, limits={"max_tokens": 200})
    # An estimate that fits: without one, the default reservation (4000) would not.
    allowed = gate(agent_api, task["id"], est_prompt_tokens=100, max_output_tokens=50)
    assert settle(
        agent_api, task["id"], allowed["model_call"], prompt_tokens=150, completion_tokens=60
    ) == {"decision": "CONTINUE"}

    answer = gate(agent_api, task["id"])

    stop_report = assert_stopped(answer, "PARTIAL", "token_budget", "GUARD_TOKEN_LIMIT")
    assert stop_report["usage"]["tokens"] == 210
    assert stop_report["usage"]["model_calls"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_refuses_the_model_call_that_could_exceed_max_cost(agent_api, price):
    task = new_task(agent_api, limits={"max_cost": "0.50"})
    allowed = gate(
        agent_api, task["id"], model="gpt-x", est_prompt_tokens=100, max_output_tokens=100
    )
    assert allowed["decision"] == "ALLOW"
    settle(agent_api, task["id"], allowed["model_call"], prompt_tokens=100, completion_tokens=100)
    assert get_task(agent_api, task["id"])["usage"]["cost"] == "0.3000"

    answer = gate(
        agent_api, task["id"], model="gpt-x", est_prompt_tokens=100, max_output_tokens=100
    )

    stop_report = assert_stopped(answer, "PARTIAL", "cost_budget", "GUARD_COST_LIMIT")
    assert stop_report["usage"]["model_calls"] == 1
    assert stop_report["usage"]["cost"] == "0.3000"
    assert stop_report["usage"]["tokens"] == 200
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_counts_an_open_reservation_against_max_cost(agent_api, price):
    task = new_task(agent_api, limits={"max_cost": "0.50"})
    first = gate(agent_api, task["id"], est_prompt_tokens=100, max_output_tokens=100)
    assert first["decision"] == "ALLOW"

    answer = gate(agent_api, task["id"], est_prompt_tokens=100, max_output_tokens=100)

    assert_stopped(answer, "PARTIAL", "cost_budget", "GUARD_COST_LIMIT")
    assert get_task(agent_api, task["id"])["usage"]["model_calls"] == 1


def test_it_refuses_the_model_call_past_the_agents_daily_cap(make_agent, client, price):
    _, token = make_agent("frugal", daily_cap="0.01")
    api = Caller(client, token)
    first = new_task(api)
    allowed = gate(api, first["id"], est_prompt_tokens=5)  # reserves 0.005
    assert allowed["decision"] == "ALLOW"
    settle(api, first["id"], allowed["model_call"], prompt_tokens=8, completion_tokens=0)

    answer = gate(api, first["id"], est_prompt_tokens=5)  # 0.008 + 0.005 > 0.01

    stop_report = assert_stopped(answer, "PARTIAL", "spend_cap", "GUARD_COST_LIMIT")
    assert stop_report["usage"]["model_calls"] == 1
    assert stop_report["usage"]["cost"] == "0.0080"
    assert_stop_is_sticky(api, first["id"])


def test_it_applies_the_daily_cap_across_all_tasks_of_the_agent(make_agent, client, price):
    _, token = make_agent("frugal", daily_cap="0.01")
    api = Caller(client, token)
    first = new_task(api)
    allowed = gate(api, first["id"], est_prompt_tokens=8)
    settle(api, first["id"], allowed["model_call"], prompt_tokens=8, completion_tokens=0)

    second = new_task(api)
    answer = gate(api, second["id"], est_prompt_tokens=5)

    assert_stopped(answer, "PARTIAL", "spend_cap", "GUARD_COST_LIMIT")
    assert get_task(api, second["id"])["usage"]["model_calls"] == 0
    assert get_task(api, first["id"])["state"] == "RUNNING"


@pytest.mark.parametrize("daily_cap", [None, "5.00"], ids=["no-cap", "cap"])
def test_the_agent_day_holds_each_allowed_reservation_and_nothing_of_a_refused_gate(
    make_agent, client, price, daily_cap
):
    from decimal import Decimal

    from django.utils import timezone

    from agents.models import AgentDay

    agent, token = make_agent("booked", **({"daily_cap": daily_cap} if daily_cap else {}))
    api = Caller(client, token)
    task = new_task(api, limits={"max_model_calls": 1})
    allowed = gate(api, task["id"], est_prompt_tokens=5)  # reserves 0.005
    assert allowed["decision"] == "ALLOW"
    assert_stopped(gate(api, task["id"], est_prompt_tokens=7), "PARTIAL", "model_budget",
                   "GUARD_ROUND_LIMIT")  # fmt: skip

    day = AgentDay.objects.get(agent=agent, day=timezone.now().date())
    assert (day.reserved, day.spent) == (Decimal("0.005"), Decimal(0))
    settle(api, task["id"], allowed["model_call"], prompt_tokens=3, completion_tokens=0)
    day.refresh_from_db()
    assert (day.reserved, day.spent) == (Decimal(0), Decimal("0.003"))
