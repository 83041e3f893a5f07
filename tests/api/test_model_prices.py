"""Admins keep the price table (Django admin); the gate reserves by it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents.models import ModelPrice

pytestmark = pytest.mark.django_db

PRICE = {"model": "gpt-x", "input_per_million": "3", "output_per_million": "15"}


def test_an_admin_adds_a_model_price(make_user, client):
    admin, _ = make_user("adam", admin=True)
    client.force_login(admin)

    response = client.post("/django-admin/agents/modelprice/add/", PRICE)

    assert response.status_code == 302
    assert ModelPrice.objects.get(model="gpt-x").output_per_million == Decimal(15)


def test_an_operator_may_not_change_prices(make_user, client):
    operator, _ = make_user("olivia")
    client.force_login(operator)

    response = client.post("/django-admin/agents/modelprice/add/", PRICE)

    assert response.status_code in (302, 403)  # not staff: sent to the admin's own sign-in
    assert not ModelPrice.objects.filter(model="gpt-x").exists()


def test_the_gate_reserves_by_the_price_table(agent_api):
    ModelPrice.objects.create(model="gpt-x", input_per_million=3, output_per_million=15)
    task = agent_api.post("tasks", {"goal": "price check"}).body

    agent_api.post(
        f"tasks/{task['id']}/model-calls",
        {"model": "gpt-x", "est_prompt_tokens": 100_000, "max_output_tokens": 10_000},
    )

    remaining = agent_api.get(f"tasks/{task['id']}").body["remaining"]
    assert Decimal(remaining["cost"]) == Decimal("5.00") - Decimal("0.45")
    assert remaining["tokens"] == 200_000 - 110_000  # tokens are reserved too
