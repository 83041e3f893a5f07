"""Money is exact on every database: each amount the guard reserves, settles or charges reads
back to its last place, whatever the database does with numbers (SQLite keeps a number with a
fraction as a binary float)."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest
from django.utils import timezone

from agents import selectors
from agents.models import AgentDay, LimitProfile, ModelPrice, Task
from tests.api.helpers import gate, new_task, settle

pytestmark = pytest.mark.django_db

PROMPT = 1000  # tokens each gate estimates: a model priced at `amount * 1000` reserves `amount`


@pytest.fixture(autouse=True)
def _roomy_profile(profile):
    """Budgets that stop nothing here: each test counts money, not limits."""
    LimitProfile.objects.filter(pk=profile.pk).update(
        max_cost=Decimal("100000"), max_model_calls=1000, max_tokens=10**9
    )


def _reserve(api, task_id: str, amount: str) -> int:
    """A gate that reserves exactly `amount` (a model of its own priced for it); its call."""
    model = f"model-{amount}"
    ModelPrice.objects.get_or_create(
        model=model,
        defaults={"input_per_million": Decimal(amount) * PROMPT, "output_per_million": 0},
    )
    allowed = gate(api, task_id, model=model, est_prompt_tokens=PROMPT, max_output_tokens=0)
    assert allowed["decision"] == "ALLOW"
    return allowed["model_call"]


def _release(api, task_id: str, call: int) -> dict:
    """The usage report of a call that used nothing: its reservation is released, not spent."""
    return settle(api, task_id, call, prompt_tokens=0, completion_tokens=0)


def test_an_open_reservation_reads_back_to_the_last_place(agent_api):
    task = new_task(agent_api)["id"]
    calls = [_reserve(agent_api, task, a) for a in ("2.194005", "2.900343", "0.008122")]

    for call in calls[:2]:
        _release(agent_api, task, call)

    spent, reserved = selectors.spend_on(timezone.now().date())
    assert (spent, reserved) == (Decimal("0"), Decimal("0.008122"))
    assert str(reserved) == "0.008122"
    assert Task.objects.get(pk=task).cost_reserved == Decimal("0.008122")


def test_releasing_every_reservation_leaves_the_day_at_zero(agent_api):
    """0.7 + 0.1 - 0.7 - 0.1 is a little below zero in binary floating point: the day row's
    `reserved >= 0` rule refused the last release, and its usage report answered 500."""
    task = new_task(agent_api)["id"]
    first, second = _reserve(agent_api, task, "0.7"), _reserve(agent_api, task, "0.1")

    assert _release(agent_api, task, first)["decision"] == "CONTINUE"
    assert _release(agent_api, task, second)["decision"] == "CONTINUE"

    day = AgentDay.objects.get()
    assert (day.spent, day.reserved) == (Decimal("0"), Decimal("0"))
    assert Task.objects.get(pk=task).cost_reserved == Decimal("0")


def test_a_spend_adds_up_to_the_last_place(agent_api):
    """Fifty spends whose sum, added up in binary floating point, was 76.2829669999999."""
    picks = random.Random(67)
    amounts = [str(Decimal(picks.randint(1, 3_000_000)).scaleb(-6)) for _ in range(50)]
    task = new_task(agent_api)["id"]
    for amount in amounts:
        call = _reserve(agent_api, task, amount)
        # Used as estimated: the reservation becomes spend.
        settle(agent_api, task, call, prompt_tokens=PROMPT, completion_tokens=0)

    spent, reserved = selectors.spend_on(timezone.now().date())
    assert sum(map(Decimal, amounts)) == Decimal("76.282967")
    assert (str(spent), reserved) == ("76.282967", Decimal("0"))
    assert Task.objects.get(pk=task).cost_spent == Decimal("76.282967")
