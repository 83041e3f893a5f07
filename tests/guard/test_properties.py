"""Invariants of the guard core under arbitrary sequences of calls (hypothesis).

A random "agent" drives a task with model calls, usage reports, tool requests, results,
finishes, stops, sweeps, operator resumes and the passing of time, including malformed input.
Whatever it does, budgets hold, stops are sticky and usage never goes backwards.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict
from datetime import timedelta
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.guard import core
from agents.guard.terms import (
    EXECUTE,
    OPERATION_STATES,
    PENDING,
    READ,
    REASON_CODES,
    RESULT_KINDS,
    RETRYABLE,
    STOP,
    SUCCESS,
    WRITE,
    AgentView,
    Limits,
    ModelCallRequest,
    OperationView,
    Outcome,
    TaskState,
    ToolCallView,
    ToolRequest,
    ToolResult,
    UsageReport,
)

from .factories import NOW, make_task

PROPERTY_SETTINGS = settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])

# -- strategies --------------------------------------------------------------------------------

small = st.integers(min_value=1, max_value=6)
rarely = st.sampled_from([False] * 9 + [True])
money = st.decimals(min_value=0, max_value=3, places=2)

limits_st = st.builds(
    Limits,
    max_model_calls=small,
    max_tool_requests=st.integers(min_value=1, max_value=15),
    max_tool_executions=small,
    max_same_call=st.integers(min_value=1, max_value=3),
    repeat_action=st.sampled_from(["block", "stop"]),
    max_cycle_period=st.integers(min_value=2, max_value=4),
    max_stagnant=small,
    max_retries=st.integers(min_value=0, max_value=4),
    max_polls=st.integers(min_value=0, max_value=4),
    deadline_seconds=st.integers(min_value=30, max_value=900),
    max_tokens=st.integers(min_value=1, max_value=5000),
    max_cost=money,
    progress_mode=st.sampled_from(["evidence", "novelty"]),
    near_duplicate_threshold=st.one_of(st.none(), st.floats(min_value=0.5, max_value=1.0)),
)

evidence_st = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"revision": st.integers(min_value=-1, max_value=6), "done": st.booleans()},
        optional={
            "committed": st.booleans(),
            "milestone": st.sampled_from(["loaded", "validated", "sent"]),
        },
    ),
    st.sampled_from(["done", {"revision": True, "done": True}, {"revision": 1}, []]),
)

request_st = st.builds(
    ToolRequest,
    tool=st.sampled_from(["search", "lookup", "send"]),
    args=st.fixed_dictionaries({"q": st.sampled_from(["a", "b", "c", "ab", "abc", "x", "xy"])}),
    effect=st.sampled_from([READ, READ, WRITE]),
    operation_key=st.sampled_from([None, "k1", "k2"]),
    job_id=st.sampled_from([None, None, None, "job-1"]),
)

operation_st = st.one_of(
    st.none(),
    st.builds(
        OperationView,
        state=st.sampled_from(OPERATION_STATES),
        fingerprint=st.sampled_from(["same", "other"]),
        lease_live=st.booleans(),
        result=st.just({"stored": True}),
    ),
)

result_st = st.builds(
    ToolResult,
    kind=st.sampled_from([*RESULT_KINDS, "BOGUS"]),
    data=st.one_of(st.none(), st.integers(min_value=0, max_value=3)),
    data_hash=st.sampled_from([None, None, "h1", "h2"]),
    wait_ms=st.sampled_from([None, 0, 10, 5_000, 10**9]),
    job_id=st.sampled_from([None, "job-1"]),
    attempts=st.integers(min_value=-1, max_value=3),
    evidence=evidence_st,
)

grant_st = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "model_calls": st.integers(min_value=0, max_value=3),
            "tool_requests": st.integers(min_value=0, max_value=3),
            "tool_executions": st.integers(min_value=0, max_value=3),
            "retries": st.integers(min_value=0, max_value=3),
            "polls": st.integers(min_value=0, max_value=3),
            "tokens": st.integers(min_value=0, max_value=1000),
            "cost": money,
            "seconds": st.integers(min_value=0, max_value=600),
        },
    ),
    st.just({"model_calls": -1}),
    st.just({"bogus": 1}),
)

action_st = st.one_of(
    st.tuples(st.just("model"), money, rarely, st.one_of(st.none(), money)),
    st.tuples(
        st.just("usage"),
        money,
        money,
        st.integers(min_value=0, max_value=2000),
        st.sampled_from(["", "s1", "s2"]),
    ),
    st.tuples(st.just("request"), request_st, operation_st, rarely),
    st.tuples(st.just("result"), result_st),
    st.tuples(st.just("finish"), evidence_st),
    st.tuples(st.just("stop"), st.sampled_from(["operator_stop", "agent_stop", "agent_paused"])),
    st.tuples(st.just("expire")),
    st.tuples(st.just("lease_expired")),
    st.tuples(st.just("resume"), grant_st),
    st.tuples(st.just("advance"), st.integers(min_value=1, max_value=300)),
)

# A busy agent: mostly tool requests and usable results, sometimes a model call, an operator
# resume or time passing; so tasks live long enough to reach their execution limits.
good_result_st = st.builds(
    ToolResult,
    kind=st.sampled_from([SUCCESS, SUCCESS, SUCCESS, RETRYABLE, PENDING]),
    data=st.integers(min_value=0, max_value=5),
    wait_ms=st.just(10),
    job_id=st.just("job-1"),
    evidence=st.one_of(
        st.none(), st.fixed_dictionaries({"revision": small, "done": st.just(False)})
    ),
)
busy_request_st = st.builds(
    ToolRequest,
    tool=st.sampled_from(["search", "lookup"]),
    args=st.fixed_dictionaries({"q": st.integers(min_value=0, max_value=12)}),
    job_id=st.sampled_from([None] * 5 + ["job-1"]),
)


def weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """Pick a strategy with the given weights (one_of would draw them about evenly)."""
    pool = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(pool).flatmap(lambda strategy: strategy)


busy_action_st = weighted(
    (6, st.tuples(st.just("request"), busy_request_st, st.none(), st.just(False))),
    (1, st.tuples(st.just("request"), request_st, operation_st, st.just(False))),
    (5, st.tuples(st.just("result"), good_result_st)),
    (1, st.tuples(st.just("result"), result_st)),
    (1, st.tuples(st.just("model"), money, st.just(False), st.none())),
    (2, st.tuples(st.just("resume"), grant_st)),
    (1, st.tuples(st.just("advance"), st.integers(min_value=1, max_value=60))),
)

mixed_action_st = weighted((9, busy_action_st), (1, action_st))


# -- a driver ----------------------------------------------------------------------------------


class Driver:
    """Applies actions to a task the way the service would, remembering executed calls."""

    def __init__(self, task: TaskState):
        self.task = task
        self.now = NOW
        self.executed: list[ToolCallView] = []
        self.execute_count = 0

    def apply(self, action: tuple[Any, ...]) -> Outcome | None:
        task, now = self.task, self.now
        kind = action[0]
        if kind == "model":
            _, estimate, paused, cap = action
            view = AgentView(paused=paused, daily_cap=cap, spent_today=Decimal("0"))
            return core.gate_model_call(task, ModelCallRequest(estimate_cost=estimate), view, now)
        if kind == "usage":
            _, reserved, actual, tokens, signature = action
            return core.settle_usage(task, UsageReport(reserved, actual, tokens, signature), now)
        if kind == "request":
            _, req, operation, paused = action
            fp, text = core.fingerprint(req.tool, req.args, req.ignore_fields)
            if operation is not None and operation.fingerprint == "same":
                operation = OperationView(
                    operation.state, fp, operation.lease_live, operation.result
                )
            out = core.request_tool(task, req, operation, AgentView(paused=paused), now)
            if out.decision == EXECUTE:
                self.execute_count += 1
                self.executed.append(ToolCallView(req.tool, req.effect, fp, text, req.job_id))
            return out
        if kind == "result":
            if self.executed:
                call = self.executed.pop(0)
            elif task.terminal:
                call = ToolCallView("search", READ, "late")  # a straggler from before the stop
            else:
                return None  # nothing ran, so no result can arrive
            return core.report_result(task, call, action[1], now)
        if kind == "finish":
            return core.finish(task, action[1], now)
        if kind == "stop":
            return core.stop(task, action[1], now)
        if kind == "expire":
            return core.expire_deadline(task, now)
        if kind == "lease_expired":
            return core.lease_expired(task, now)
        if kind == "resume":
            with contextlib.suppress(core.GuardError):
                core.resume(task, action[1], now)
            return None
        self.now = now + timedelta(seconds=action[1])
        return None


def usage_numbers(task: TaskState) -> dict[str, Decimal]:
    used = core.usage(task)
    return {key: Decimal(str(value)) for key, value in used.items()}


# -- properties --------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(limits=limits_st, actions=st.lists(mixed_action_st, min_size=5, max_size=80))
def test_executions_never_exceed_the_execution_limit(limits, actions):
    driver = Driver(make_task(**asdict(limits)))
    task = driver.task
    for action in actions:
        driver.apply(action)
        assert task.tool_executions <= task.limits.max_tool_executions
        assert task.tool_executions == driver.execute_count
        assert task.model_calls <= task.limits.max_model_calls
        assert task.tool_requests <= task.limits.max_tool_requests
        assert task.polls <= task.limits.max_polls


@PROPERTY_SETTINGS
@given(limits=limits_st, actions=st.lists(mixed_action_st, min_size=5, max_size=80))
def test_executions_never_exceed_the_limit_without_any_resume(limits, actions):
    driver = Driver(make_task(**asdict(limits)))
    for action in actions:
        if action[0] != "resume":
            driver.apply(action)
    assert driver.execute_count <= limits.max_tool_executions


@PROPERTY_SETTINGS
@given(
    limits=limits_st,
    prefix=st.lists(mixed_action_st, max_size=40),
    stop_reason=st.sampled_from(["operator_stop", "agent_stop", "agent_paused"]),
    probes=st.lists(action_st.filter(lambda a: a[0] != "resume"), min_size=1, max_size=10),
)
def test_a_terminal_task_never_changes(limits, prefix, stop_reason, probes):
    driver = Driver(make_task(**asdict(limits)))
    for action in prefix:
        driver.apply(action)
    task = driver.task
    if not task.terminal:
        core.stop(task, stop_reason, driver.now)
    state, reason = task.state, task.reason
    for probe in probes:
        before = asdict(task)
        reporting = driver.executed[0].fingerprint if driver.executed else None
        out = driver.apply(probe)
        after = asdict(task)
        if probe[0] == "usage":
            # The money was spent: settlement is recorded even on a stopped task, by design.
            for name in ("cost_spent", "cost_reserved", "tokens_used"):
                before.pop(name), after.pop(name)
        if probe[0] == "result":
            # The call that reported is no longer in flight: it leaves the pending set, once,
            # and nothing else does.
            expected = list(before.pop("pending"))
            if reporting in expected:
                expected.remove(reporting)
            assert after.pop("pending") == expected
        if probe[0] == "advance":
            continue
        assert after == before
        assert out is not None
        assert (out.decision, out.stopped_now, out.reason) == (STOP, False, reason)
        assert (task.state, task.reason) == (state, reason)


@PROPERTY_SETTINGS
@given(limits=limits_st, actions=st.lists(mixed_action_st, min_size=5, max_size=80))
def test_usage_never_decreases_not_even_across_a_resume(limits, actions):
    driver = Driver(make_task(**asdict(limits)))
    task = driver.task
    previous = usage_numbers(task)
    phase = task.phase
    for action in actions:
        driver.apply(action)
        current = usage_numbers(task)
        for key, value in previous.items():
            assert current[key] >= value, key
        assert task.phase >= phase
        previous, phase = current, task.phase


@PROPERTY_SETTINGS
@given(limits=limits_st, actions=st.lists(mixed_action_st, min_size=5, max_size=80))
def test_only_the_call_that_stops_a_task_says_stopped_now_and_every_stop_has_a_known_reason(
    limits, actions
):
    driver = Driver(make_task(**asdict(limits)))
    task = driver.task
    for action in actions:
        was_terminal = task.terminal
        out = driver.apply(action)
        if out is not None:
            assert out.stopped_now == (not was_terminal and task.terminal)
            if out.decision == STOP:
                assert task.terminal and out.reason == task.reason
        if task.terminal:
            assert task.reason in REASON_CODES
        else:
            assert task.reason is None
        assert task.cost_reserved >= 0


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200)
@given(args=st.dictionaries(st.text(max_size=4), json_values, max_size=5))
def test_canonical_json_round_trips_and_ignores_key_order(args):
    text = core.canonical_json(args)
    assert json.loads(text) == args
    reordered = dict(reversed(list(args.items())))
    assert core.fingerprint("t", reordered, []) == core.fingerprint("t", args, [])
