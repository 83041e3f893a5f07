from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from decimal import Decimal

import pytest

from agents.guard.core import (
    GuardError,
    expire_deadline,
    finish,
    gate_model_call,
    lease_expired,
    parse_grant,
    resume,
    seconds_needed,
    stop,
    usage,
)
from agents.guard.terms import (
    COMPLETED,
    CONTINUE,
    FAILED,
    NEEDS_HUMAN,
    PARTIAL,
    RUNNING,
    STOP,
    STOPPED,
    AgentView,
    ModelCallRequest,
    WindowEntry,
)

from .factories import NOW, ev, make_task

# -- finish ------------------------------------------------------------------------------------


def test_finishing_with_done_evidence_completes_the_task():
    task = make_task()
    out = finish(task, ev(4, done=True, milestone="shipped"), NOW)
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "goal_met", True)
    assert (task.state, task.revision, task.milestones) == (COMPLETED, 4, ["shipped"])


@pytest.mark.parametrize(
    "evidence",
    [None, ev(1, done=False), {"done": True}, {"revision": -1, "done": True}, "done"],
    ids=["no evidence", "not done", "no revision", "old revision", "text"],
)
def test_finishing_without_verified_done_is_goal_unverified(evidence):
    task = make_task()
    out = finish(task, evidence, NOW)
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "goal_unverified", True)
    assert task.state == PARTIAL


def test_finishing_with_valid_evidence_that_is_not_done_still_records_it():
    task = make_task()
    finish(task, ev(2, milestone="half"), NOW)
    assert (task.revision, task.milestones) == (2, ["half"])


def test_finishing_a_stopped_task_changes_nothing():
    task = make_task(state=FAILED)
    task.reason = "fatal"
    before = asdict(task)
    out = finish(task, ev(1, done=True), NOW)
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "fatal", False)
    assert asdict(task) == before


# -- stop --------------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["operator_stop", "agent_stop", "agent_paused"])
def test_a_stop_makes_the_task_stopped_with_its_reason(reason):
    task = make_task()
    out = stop(task, reason, NOW)
    assert (out.decision, out.reason, out.stopped_now) == (STOP, reason, True)
    assert (task.state, task.reason) == (STOPPED, reason)


def test_stopping_a_stopped_task_is_idempotent_and_keeps_the_first_reason():
    task = make_task()
    stop(task, "agent_stop", NOW)
    before = asdict(task)
    out = stop(task, "operator_stop", NOW)
    assert (out.reason, out.stopped_now) == ("agent_stop", False)
    assert asdict(task) == before


def test_a_stop_for_another_reason_is_refused():
    with pytest.raises(GuardError) as exc:
        stop(make_task(), "deadline", NOW)
    assert exc.value.code == "BAD_REASON"


# -- sweeps ------------------------------------------------------------------------------------


def test_the_deadline_sweep_stops_a_running_task_past_its_deadline():
    task = make_task(deadline_in=60)
    out = expire_deadline(task, NOW + timedelta(seconds=60))
    assert (out.decision, out.reason, out.stopped_now, task.state) == (
        STOP,
        "deadline",
        True,
        PARTIAL,
    )


def test_the_deadline_sweep_leaves_a_task_within_its_deadline_running():
    task = make_task(deadline_in=60)
    out = expire_deadline(task, NOW + timedelta(seconds=59))
    assert (out.decision, task.state) == (CONTINUE, RUNNING)


def test_the_deadline_sweep_leaves_a_stopped_task_alone():
    task = make_task(state=NEEDS_HUMAN)
    task.reason = "unknown_commit"
    out = expire_deadline(task, NOW + timedelta(days=1))
    assert (out.stopped_now, task.reason) == (False, "unknown_commit")


def test_an_expired_lease_makes_a_running_task_need_a_human():
    task = make_task()
    out = lease_expired(task, NOW)
    assert (out.reason, out.stopped_now, task.state) == ("unknown_commit", True, NEEDS_HUMAN)


def test_an_expired_lease_leaves_a_stopped_task_alone():
    task = make_task()
    stop(task, "operator_stop", NOW)
    out = lease_expired(task, NOW)
    assert (out.stopped_now, task.reason) == (False, "operator_stop")


# -- resume ------------------------------------------------------------------------------------


def stopped_task(**limits):
    task = make_task(**limits)
    task.model_calls, task.tool_executions, task.tokens_used = 20, 7, 1000
    task.cost_spent = Decimal("1.5")
    task.stagnant = 3
    task.window = [WindowEntry("a", "search"), WindowEntry("a", "search")]
    task.blocked = ["a"]
    task.state, task.reason, task.report = PARTIAL, "model_budget", {"state": PARTIAL}
    return task


@pytest.mark.parametrize(
    ("state", "code"), [(RUNNING, "TASK_RUNNING"), (COMPLETED, "TASK_COMPLETED")]
)
def test_a_running_or_completed_task_cannot_be_resumed(state, code):
    task = make_task(state=state)
    before = asdict(task)
    with pytest.raises(GuardError) as exc:
        resume(task, {"model_calls": 5}, NOW)
    assert exc.value.code == code
    assert asdict(task) == before


def test_resume_opens_the_next_phase_and_keeps_usage_window_and_blocked_markers():
    task = stopped_task()
    used = usage(task)
    resume(task, {"model_calls": 5}, NOW)
    assert (task.state, task.reason, task.report, task.phase) == (RUNNING, None, None, 2)
    assert usage(task) == used
    assert task.stagnant == 0
    assert [e.fingerprint for e in task.window] == ["a", "a"] and task.blocked == ["a"]


def test_each_grant_raises_its_own_limit():
    task = stopped_task()
    deadline = task.deadline_at
    grant = {
        "model_calls": 1,
        "tool_requests": 2,
        "tool_executions": 3,
        "retries": 4,
        "polls": 5,
        "tokens": 6,
        "cost": Decimal("0.5"),
        "seconds": 60,
    }
    resume(task, grant, NOW)
    lim = task.limits
    assert (lim.max_model_calls, lim.max_tool_requests, lim.max_tool_executions) == (21, 42, 23)
    assert (lim.max_retries, lim.max_polls, lim.max_tokens) == (7, 15, 200_006)
    assert lim.max_cost == Decimal("5.5")
    assert lim.deadline_seconds == 960
    assert task.deadline_at == deadline + timedelta(seconds=60)


def test_a_missing_grant_raises_nothing():
    task = stopped_task()
    limits_before = asdict(task.limits)
    resume(task, {}, NOW)
    assert asdict(task.limits) == limits_before


@pytest.mark.parametrize(
    "grant",
    [
        {"model_calls": -1},
        {"cost": "-0.01"},
        {"cost": "lots"},
        {"bananas": 1},
        {"seconds": 1.5},
        {"tokens": True},
        {"cost": "NaN"},
        {"cost": "Infinity"},
        ["model_calls"],
    ],
    ids=["negative count", "negative cost", "bad cost", "unknown", "float seconds", "bool",
         "nan cost", "infinite cost", "not an object"],
)  # fmt: skip
def test_a_bad_grant_is_refused_and_changes_nothing(grant):
    task = stopped_task()
    before = asdict(task)
    with pytest.raises(GuardError) as exc:
        resume(task, grant, NOW)
    assert exc.value.code == "BAD_GRANT"
    assert asdict(task) == before


def test_a_grant_is_read_by_one_parser_with_one_sentence_per_mistake():
    """The operator service (console text, API JSON) and `resume` share `parse_grant`."""
    assert parse_grant({"model_calls": "2", "cost": "1.50", "polls": None, "tokens": ""}) == {
        "model_calls": 2,
        "cost": Decimal("1.50"),
    }
    with pytest.raises(GuardError) as exc:
        parse_grant({"model_calls": -1, "tokens": "lots", "seconds": 1.5, "cost": "inf", "x": 1})
    assert exc.value.fields == {
        "grant.model_calls": "must be zero or more",
        "grant.tokens": "must be a number",
        "grant.seconds": "must be a whole number",
        "grant.cost": "must be a finite amount",
        "grant.x": "unknown grant; use one of model_calls, tool_requests, tool_executions, "
        "retries, polls, tokens, cost, seconds",
    }
    with pytest.raises(GuardError) as same:
        resume(stopped_task(), {"model_calls": -1}, NOW)
    assert (same.value.message, same.value.fields) == (
        "The grant is not valid.",
        {"grant.model_calls": "must be zero or more"},
    )


def test_a_resumed_task_runs_into_its_old_limit_without_a_grant_of_that_dimension():
    task = stopped_task()
    resume(task, {"tokens": 10}, NOW)
    out = gate_model_call(task, ModelCallRequest(), AgentView(), NOW)
    assert (out.reason, task.phase) == ("model_budget", 2)


@pytest.mark.parametrize(
    ("grant", "field"),
    [
        ({"cost": "1000000000000000000000000"}, "grant.cost"),
        ({"cost": "0.0000001"}, "grant.cost"),
        ({"model_calls": 2**31}, "grant.model_calls"),
        ({"tokens": 2**63}, "grant.tokens"),
        ({"seconds": 99999999999999999999}, "grant.seconds"),
        ({"seconds": 300000000000}, "grant.seconds"),
    ],
)
def test_a_grant_no_limit_can_hold_is_refused_and_changes_nothing(grant, field):
    """Every limit has a largest value (the database's columns, a date's range): a grant past
    it would make the task's report, its page and its stop fail."""
    task = stopped_task()
    before = asdict(task)

    with pytest.raises(GuardError) as exc:
        resume(task, grant, NOW)

    assert exc.value.code == "BAD_GRANT"
    assert set(exc.value.fields) == {field}
    assert asdict(task) == before


def test_a_grant_that_would_raise_a_limit_past_its_largest_value_is_refused():
    task = stopped_task()
    task.limits.max_model_calls = 2**31 - 10
    task.limits.max_cost = Decimal("99999999.000000")
    before = asdict(task)

    with pytest.raises(GuardError) as exc:
        resume(task, {"model_calls": 20, "cost": "1"}, NOW)

    assert set(exc.value.fields) == {"grant.model_calls", "grant.cost"}
    assert asdict(task) == before


def test_a_grant_up_to_the_largest_values_is_taken():
    task = stopped_task()
    task.limits.max_model_calls = 1

    seconds = 2**31 - 1 - task.limits.deadline_seconds

    resume(task, {"model_calls": 2**31 - 2, "cost": "99999990", "seconds": seconds}, NOW)

    assert task.limits.max_model_calls == 2**31 - 1
    assert task.limits.deadline_seconds == 2**31 - 1
    assert task.state == RUNNING


# -- a resume past the deadline ------------------------------------------------------------


def past_deadline(seconds_ago: float):
    task = stopped_task()
    task.deadline_at = NOW - timedelta(seconds=seconds_ago)
    return task


@pytest.mark.parametrize(("ago", "needed"), [(0, 1), (0.25, 1), (3600, 3601), (3600.5, 3601)])
def test_the_seconds_a_resume_needs_put_the_deadline_ahead_of_now(ago, needed):
    task = past_deadline(ago)
    assert seconds_needed(task, NOW) == needed
    resume(task, {"seconds": needed}, NOW)
    assert task.deadline_at > NOW
    assert expire_deadline(task, NOW).decision == CONTINUE


def test_a_deadline_still_ahead_needs_no_seconds():
    assert seconds_needed(stopped_task(), NOW) == 0


@pytest.mark.parametrize("grant", [{}, {"model_calls": 5}, {"seconds": 3600}])
def test_a_resume_that_leaves_the_deadline_past_is_refused_naming_the_seconds(grant):
    task = past_deadline(3600)
    before = asdict(task)

    with pytest.raises(GuardError) as exc:
        resume(task, grant, NOW)

    assert exc.value.code == "DEADLINE_PASSED"
    assert "3601 seconds" in exc.value.message
    assert exc.value.fields["seconds_needed"] == 3601
    assert "3601" in exc.value.fields["grant.seconds"]
    assert asdict(task) == before
