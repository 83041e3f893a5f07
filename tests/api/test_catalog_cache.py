"""Prices and tool policies are kept in each web process (agents.services.catalog); an admin's
change is seen at the very next decision, because the task lock reads the catalog's version."""

from __future__ import annotations

from decimal import Decimal

from agents.models import CatalogVersion, ModelPrice, Task, ToolPolicy
from tests.api.helpers import gate, new_task, request_tool


def reserved(task_id: str) -> Decimal:
    return Task.objects.get(pk=task_id).cost_reserved


def test_a_changed_price_is_used_by_the_next_gate(agent_api):
    price = ModelPrice.objects.create(model="m", input_per_million=100_000, output_per_million=0)
    task = new_task(agent_api)["id"]
    gate(agent_api, task, model="m", est_prompt_tokens=1, max_output_tokens=0)
    assert reserved(task) == Decimal("0.1")

    price.input_per_million = Decimal(300_000)
    price.save()
    gate(agent_api, task, model="m", est_prompt_tokens=1, max_output_tokens=0)

    assert reserved(task) == Decimal("0.4")


def test_a_deleted_price_makes_the_model_free_at_once(agent_api):
    price = ModelPrice.objects.create(model="m", input_per_million=100_000, output_per_million=0)
    task = new_task(agent_api)["id"]
    gate(agent_api, task, model="m", est_prompt_tokens=1, max_output_tokens=0)

    price.delete()
    gate(agent_api, task, model="m", est_prompt_tokens=1, max_output_tokens=0)

    assert reserved(task) == Decimal("0.1")


def test_a_new_tool_policy_shapes_the_next_fingerprint(agent_api):
    task = new_task(agent_api)["id"]
    first = request_tool(agent_api, task, "search", {"q": "x", "request_id": 1})

    ToolPolicy.objects.create(tool="search", ignore_fields=["request_id"])
    second = request_tool(agent_api, task, "search", {"q": "x", "request_id": 2})
    third = request_tool(agent_api, task, "search", {"q": "x", "request_id": 3})

    assert first["fingerprint"] != second["fingerprint"] == third["fingerprint"]


def test_every_change_gives_the_catalog_a_new_version(db):
    numbers = []
    for n in range(3):
        ModelPrice.objects.update_or_create(model="m", defaults={"input_per_million": n})
        numbers.append(CatalogVersion.objects.get(pk=1).number)

    assert len(set(numbers)) == 3
