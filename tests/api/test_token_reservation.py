"""Tokens are reserved like money (issue 8, hole 1): check 5 of the model-call gate counts the
open reservations, and a gate without an estimate reserves a default."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from agents.models import LimitProfile, ModelPrice, Task
from agents.services import sweeps

from .helpers import assert_stopped, gate, get_task, new_task, settle

pytestmark = pytest.mark.django_db


def test_two_open_gates_cannot_reserve_more_tokens_than_the_task_has(agent_api):
    task = new_task(agent_api, limits={"max_tokens": 2000})
    first = gate(agent_api, task["id"], est_prompt_tokens=1000, max_output_tokens=500)
    assert first["decision"] == "ALLOW"

    answer = gate(agent_api, task["id"], est_prompt_tokens=1000, max_output_tokens=500)

    assert_stopped(answer, "PARTIAL", "token_budget", "GUARD_TOKEN_LIMIT")
    assert get_task(agent_api, task["id"])["usage"]["model_calls"] == 1


def test_the_usage_report_settles_the_token_reservation(agent_api):
    task = new_task(agent_api, limits={"max_tokens": 2000})
    first = gate(agent_api, task["id"], est_prompt_tokens=1000, max_output_tokens=500)
    settle(agent_api, task["id"], first["model_call"], prompt_tokens=100, completion_tokens=20)

    answer = gate(agent_api, task["id"], est_prompt_tokens=1000, max_output_tokens=500)

    assert answer["decision"] == "ALLOW"
    assert get_task(agent_api, task["id"])["usage"]["tokens"] == 120


def test_a_gate_without_an_estimate_reserves_the_models_default(agent_api):
    ModelPrice.objects.create(model="gpt-x", default_estimate_tokens=1500)
    task = new_task(agent_api, limits={"max_tokens": 2000})
    assert gate(agent_api, task["id"], model="gpt-x")["decision"] == "ALLOW"

    answer = gate(agent_api, task["id"], model="gpt-x")

    assert_stopped(answer, "PARTIAL", "token_budget", "GUARD_TOKEN_LIMIT")


def test_a_gate_without_an_estimate_reserves_the_profiles_default(agent_api):
    LimitProfile.objects.update_or_create(
        name="default", defaults={"default_estimate_tokens": 1200, "max_tokens": 2000}
    )
    task = new_task(agent_api)
    assert gate(agent_api, task["id"])["decision"] == "ALLOW"

    answer = gate(agent_api, task["id"])

    assert_stopped(answer, "PARTIAL", "token_budget", "GUARD_TOKEN_LIMIT")


def test_a_gate_without_an_estimate_reserves_money_too(agent_api):
    # 1 per 1,000 tokens whatever the direction; the model's default estimate is 6 tokens.
    ModelPrice.objects.create(
        model="*", input_per_million=Decimal("1000"), output_per_million=Decimal("1000"),
        default_estimate_tokens=6,
    )  # fmt: skip
    task = new_task(agent_api, limits={"max_cost": "0.01"})
    assert gate(agent_api, task["id"])["decision"] == "ALLOW"  # reserves 0.006

    answer = gate(agent_api, task["id"])  # 0.006 + 0.006 > 0.01

    assert_stopped(answer, "PARTIAL", "cost_budget", "GUARD_COST_LIMIT")


def test_an_expired_token_reservation_is_charged_as_reserved(agent_api):
    task = new_task(agent_api, limits={"max_tokens": 2000})
    gate(agent_api, task["id"], est_prompt_tokens=1000, max_output_tokens=500)

    sweeps.sweep_reservations(now=timezone.now() + timedelta(hours=1), timeout_seconds=60)

    row = Task.objects.get(pk=task["id"])
    assert (row.tokens_used, row.tokens_reserved) == (1500, 0)
    answer = gate(agent_api, task["id"], est_prompt_tokens=400, max_output_tokens=200)
    assert_stopped(answer, "PARTIAL", "token_budget", "GUARD_TOKEN_LIMIT")
