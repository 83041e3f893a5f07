"""Every total of money is exact, on SQLite and on PostgreSQL: random sequences of reservations
(model-call gates), settlements (usage reports) and expiries (the reservation sweep) through the
real services, each total checked to the last place against a Decimal model of the same steps.

The suite runs this on the database `DATABASE_URL` names (SQLite by default; CI also runs it on
PostgreSQL), so both are checked.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents import selectors
from agents.guard import terms
from agents.models import Agent, AgentDay, DailyRollup, LimitProfile, ModelCall, ModelPrice, Task
from agents.services import rollups, runner, sweeps
from agents.services.tasks import task_create

pytestmark = pytest.mark.django_db

# Prices per million tokens with six places: most token counts cost an amount no binary float
# holds exactly.
PRICES = {
    "m-odd": (Decimal("2194.005"), Decimal("2900.343")),
    "m-third": (Decimal("0.333333"), Decimal("17.693998")),
    "m-tenth": (Decimal("100000.1"), Decimal("700000.7")),
    "m-micro": (Decimal("1.000001"), Decimal("0.000001")),
}
MILLION = Decimal(1_000_000)
SIX_PLACES = Decimal("0.000001")
TIMEOUT = 60  # the sweep's timeout in these tests, seconds
EXAMPLES = 1000

_names = itertools.count()


def cost(model: str, prompt: int, output: int) -> Decimal:
    """What `prompt` and `output` tokens of `model` cost, in exact decimal arithmetic."""
    per_in, per_out = PRICES[model]
    return ((per_in * prompt + per_out * output) / MILLION).quantize(SIX_PLACES)


amounts = st.decimals(min_value=0, max_value=10_000, places=6, allow_nan=False)
tokens = st.integers(min_value=0, max_value=400_000)
gates = st.tuples(
    st.just("gate"), st.integers(0, 1), st.sampled_from(sorted(PRICES)), tokens, tokens
)
usages = st.tuples(st.just("usage"), st.integers(0, 50), tokens, tokens)
expiries = st.tuples(st.just("expire"), st.integers(0, 50))
steps = st.lists(st.one_of(gates, gates, usages, expiries), min_size=1, max_size=14)


@dataclass
class Call:
    id: int
    task: int  # index into the example's tasks
    day: date
    reserved: Decimal
    expired: bool = False
    settled: bool = False
    cost: Decimal | None = None


@dataclass
class Books:
    """The Decimal model: what every total must be."""

    calls: list[Call] = field(default_factory=list)
    spent: dict[int, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    reserved: dict[int, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    day_spent: dict[date, Decimal] = field(default_factory=lambda: defaultdict(Decimal))
    day_reserved: dict[date, Decimal] = field(default_factory=lambda: defaultdict(Decimal))

    def reserve(self, call: Call) -> None:
        self.calls.append(call)
        self.reserved[call.task] += call.reserved
        self.day_reserved[call.day] += call.reserved

    def charge(self, call: Call, amount: Decimal, released: Decimal) -> None:
        self.reserved[call.task] -= released
        self.spent[call.task] += amount
        self.day_reserved[call.day] -= released
        self.day_spent[call.day] += amount

    def expire(self, call: Call) -> None:
        call.expired = True
        self.charge(call, call.reserved, call.reserved)

    def settle(self, call: Call, actual: Decimal) -> None:
        call.settled, call.cost = True, actual
        if call.expired:  # charged as reserved already: only what exceeds it
            self.charge(call, max(actual - call.reserved, Decimal(0)), Decimal(0))
        else:
            self.charge(call, actual, call.reserved)

    def charged_on(self, day: date) -> Decimal:
        """The day's money as the daily rollup counts it."""
        total = Decimal(0)
        for call in self.calls:
            if call.day == day and call.expired:
                total += max(call.cost or Decimal(0), call.reserved)
            elif call.day == day and call.settled:
                total += call.cost or Decimal(0)
        return total


@pytest.fixture
def priced(profile):
    for model, (per_in, per_out) in PRICES.items():
        ModelPrice.objects.create(model=model, input_per_million=per_in, output_per_million=per_out)
    # Budgets the examples set themselves (a task's may only be tighter than its profile's).
    LimitProfile.objects.filter(pk=profile.pk).update(
        max_cost=Decimal("99999999.999999"), max_model_calls=1000, max_tokens=10**12
    )


def _check(books: Books, tasks: list[Task]) -> None:
    for index, task in enumerate(tasks):
        row = Task.objects.values("cost_spent", "cost_reserved").get(pk=task.pk)
        assert (row["cost_spent"], row["cost_reserved"]) == (
            books.spent[index],
            books.reserved[index],
        )
    agent_id = tasks[0].agent_id
    for day in set(books.day_spent) | set(books.day_reserved):
        held = AgentDay.objects.values("spent", "reserved").get(agent_id=agent_id, day=day)
        assert (held["spent"], held["reserved"]) == (books.day_spent[day], books.day_reserved[day])
        # The sum over the day's rows (one agent here), as the console and metrics read it.
        assert selectors.spend_on(day) == (books.day_spent[day], books.day_reserved[day])
    for call in books.calls:
        row = ModelCall.objects.values("reserved_cost", "cost").get(pk=call.id)
        assert (row["reserved_cost"], row["cost"]) == (call.reserved, call.cost)


@pytest.mark.slow  # minutes of examples, each a run of decisions on the database
@settings(
    max_examples=EXAMPLES,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    cap=st.one_of(st.none(), amounts),
    budgets=st.tuples(amounts, amounts),
    plan=steps,
)
def test_every_total_is_exact_to_the_last_place(priced, cap, budgets, plan):
    with transaction.atomic():
        agent = Agent.objects.create(
            name=f"money-{next(_names)}", namespace="ns", daily_cost_cap=cap
        )
        tasks = [
            task_create(agent=agent, goal="spend", limits={"max_cost": str(budget)})
            for budget in budgets
        ]
        books = Books()
        for step in plan:
            _take(step, books, tasks, agent, cap, budgets)
            _check(books, tasks)
        days = {call.day for call in books.calls}
        for day in days:
            rollups.rollup_day(day=day)
            rolled = sum(DailyRollup.objects.filter(day=day).values_list("cost", flat=True))
            assert rolled == books.charged_on(day)
        transaction.set_rollback(True)


def _take(step, books: Books, tasks: list[Task], agent: Agent, cap, budgets) -> None:
    kind, *args = step
    if kind == "gate":
        index, model, prompt, output = args
        _task, call, outcome = runner.model_call_gate(
            task_id=tasks[index].pk, agent=agent, model=model, est_prompt_tokens=prompt,
            max_output_tokens=output,
        )  # fmt: skip
        if outcome.decision != terms.ALLOW:
            return
        estimate = cost(model, prompt, output) if prompt + output else _default_estimate(model)
        books.reserve(Call(call.pk, index, call.created_at.date(), estimate))
        # Never more reserved and spent than the budgets allow.
        assert books.spent[index] + books.reserved[index] <= budgets[index]
        if cap is not None:
            day = call.created_at.date()
            assert books.day_spent[day] + books.day_reserved[day] <= cap
    elif kind == "usage":
        open_calls = [call for call in books.calls if not call.settled]
        if not open_calls:
            return
        call = open_calls[args[0] % len(open_calls)]
        prompt, completion = args[1], args[2]
        model = ModelCall.objects.values_list("model", flat=True).get(pk=call.id)
        runner.model_call_usage(
            task_id=tasks[call.task].pk, agent=agent, model_call_id=call.id,
            prompt_tokens=prompt, completion_tokens=completion,
        )  # fmt: skip
        books.settle(call, cost(model, prompt, completion))
    else:
        waiting = [call for call in books.calls if not call.settled and not call.expired]
        if not waiting:
            return
        last = waiting[args[0] % len(waiting)]
        created = ModelCall.objects.values_list("created_at", flat=True).get(pk=last.id)
        # Every reservation made up to `last` is past its timeout; the later ones are not.
        now = created + timedelta(seconds=TIMEOUT, microseconds=1)
        expired = sweeps.sweep_reservations(now=now, timeout_seconds=TIMEOUT).claimed
        due = [call for call in waiting if call.id <= last.id]
        assert sorted(expired) == [call.id for call in due]
        for call in due:
            books.expire(call)


def _default_estimate(model: str) -> Decimal:
    """A gate without an estimate reserves the profile's default tokens at the dearer rate."""
    tokens = LimitProfile.objects.get(name="default").default_estimate_tokens
    return (
        cost(model, tokens, 0) if PRICES[model][0] >= PRICES[model][1] else cost(model, 0, tokens)
    )
