"""Check 5 of the model-call gate: tokens are reserved like money, and a gate without an
estimate reserves a default (the model's in the price table, else the profile's)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents.guard.core import gate_model_call, model_estimate, settle_usage, token_cost
from agents.guard.terms import ALLOW, PARTIAL, STOP, ModelCallRequest, UsageReport

from .factories import NOW, agent, make_task

D = Decimal


@pytest.mark.parametrize(
    ("used", "reserved", "estimate", "max_tokens", "decision"),
    [
        (0, 0, 1500, 2000, ALLOW),
        (0, 1500, 1500, 2000, STOP),  # two open gates of 1,500 against 2,000
        (500, 0, 1500, 2000, ALLOW),  # exactly at the limit
        (500, 1, 1500, 2000, STOP),
        (2000, 0, 0, 2000, STOP),  # a call is never free of tokens: it counts as one
        (1999, 0, 0, 2000, ALLOW),
    ],
)
def test_check_5_counts_used_reserved_and_estimated_tokens(
    used, reserved, estimate, max_tokens, decision
):
    task = make_task(max_tokens=max_tokens)
    task.tokens_used, task.tokens_reserved = used, reserved

    out = gate_model_call(task, ModelCallRequest(estimate_tokens=estimate), agent(), NOW)

    assert out.decision == decision
    if decision == STOP:
        assert (task.state, task.reason) == (PARTIAL, "token_budget")
        assert task.tokens_reserved == reserved and task.model_calls == 0
    else:
        assert task.tokens_reserved == reserved + max(1, estimate)


def test_the_token_check_comes_before_the_cost_check():
    task = make_task(max_tokens=10, max_cost=D("0.01"))
    req = ModelCallRequest(estimate_tokens=11, estimate_cost=D("1"))
    assert gate_model_call(task, req, agent(), NOW).reason == "token_budget"


@pytest.mark.parametrize(
    ("prompt", "output", "model_default", "profile_default", "tokens", "cost"),
    [
        (1000, 500, 3000, 4000, 1500, "0.002000"),  # the caller's estimate wins
        (1000, 0, 3000, 4000, 1000, "0.001000"),  # a partial estimate is an estimate
        (0, 0, 3000, 4000, 3000, "0.006000"),  # none: the model's default, at the dearer rate
        (0, 0, None, 4000, 4000, "0.008000"),  # no model default: the profile's
        (-5, 0, None, 0, 1, "0.000002"),  # never below one token
    ],
)
def test_model_estimate_fills_in_a_missing_estimate(
    prompt, output, model_default, profile_default, tokens, cost
):
    # 1 per million prompt tokens, 2 per million output tokens
    assert model_estimate(
        prompt_tokens=prompt, output_tokens=output, per_in=D(1), per_out=D(2),
        model_default=model_default, profile_default=profile_default,
    ) == (tokens, D(cost))  # fmt: skip


def test_token_cost_prices_per_million_to_six_places():
    assert token_cost(D("0.5"), D("1.5"), 750, 150) == D("0.000600")


@pytest.mark.parametrize(
    ("reserved_before", "released", "reserved_after"),
    [(1500, 1500, 0), (3000, 1500, 1500), (1000, 1500, 0)],  # an expired one: not below zero
)
def test_the_usage_report_releases_the_token_reservation(reserved_before, released, reserved_after):
    task = make_task()
    task.tokens_reserved = reserved_before
    report = UsageReport(
        reserved_cost=D(0), actual_cost=D(0), tokens=120, signature="", reserved_tokens=released
    )

    settle_usage(task, report, NOW)

    assert (task.tokens_reserved, task.tokens_used) == (reserved_after, 120)
