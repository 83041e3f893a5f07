"""Pieces every service shares: numbering trace rows, prices, the core's view of an agent.

Locking the task row and moving it to and from the guard core's state is `agents.taskrow`.
"""

from __future__ import annotations

from decimal import Decimal

from agents.guard import core, terms
from agents.models import Agent, Task
from agents.services import catalog
from agents.services.catalog import Catalog


def catalog_of(task: Task) -> Catalog:
    """Prices and tool policies as of the version `lock_task` read with the lock."""
    return catalog.catalog_at(getattr(task, "catalog_version", None))


def next_seq(task: Task) -> int:
    task.trace_seq += 1
    return task.trace_seq


def cost_of(prices: Catalog, model: str, prompt_tokens: int, completion_tokens: int) -> Decimal:
    row = catalog.price_row(prices, model)
    if row is None:
        return Decimal(0)
    return core.token_cost(
        row.input_per_million, row.output_per_million, prompt_tokens, completion_tokens
    )


def model_estimate(
    prices: Catalog, model: str, prompt_tokens: int, output_tokens: int, limits: terms.Limits
) -> tuple[int, Decimal]:
    """(tokens, cost) a gate reserves: the caller's estimate, else the model's default in the
    price table, else the task's profile default (the rule is `core.model_estimate`)."""
    row = catalog.price_row(prices, model)
    return core.model_estimate(
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        per_in=row.input_per_million if row else Decimal(0),
        per_out=row.output_per_million if row else Decimal(0),
        model_default=row.default_estimate_tokens if row else None,
        profile_default=limits.default_estimate_tokens,
    )


def agent_view(agent: Agent, spent_today: Decimal = Decimal(0)) -> terms.AgentView:
    """The core's view of the agent: pass the `task.agent` that `lock_task` joined."""
    return terms.AgentView(
        paused=agent.paused, daily_cap=agent.daily_cost_cap, spent_today=spent_today
    )
