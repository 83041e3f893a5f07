from __future__ import annotations

from dataclasses import asdict

import pytest

from agents.guard.core import fingerprint, request_tool
from agents.guard.terms import (
    BLOCK,
    BLOCK_CODE,
    EXECUTE,
    IN_FLIGHT,
    NEEDS_HUMAN,
    NOT_COMMITTED,
    OP_COMMITTED,
    PARTIAL,
    REUSE,
    STOP,
    STOPPED,
    UNKNOWN,
    WAIT,
    OperationView,
    WindowEntry,
)

from .factories import NOW, agent, make_task, read, write


def ask(task, req, operation=None, **agent_kw):
    return request_tool(task, req, operation, agent(**agent_kw), NOW)


def seen(task, req, times=1):
    """Put `req` into the window `times` times, as if it had run without progress."""
    fp, text = fingerprint(req.tool, req.args, req.ignore_fields)
    for _ in range(times):
        task.window.append(WindowEntry(fingerprint=fp, tool=req.tool, args=text))
    return fp


def op(state, req, lease_live=False, result=None):
    fp, _ = fingerprint(req.tool, req.args, req.ignore_fields)
    return OperationView(state=state, fingerprint=fp, lease_live=lease_live, result=result)


# -- the happy path ----------------------------------------------------------------------------


def test_a_fresh_read_executes_and_counts_a_request_and_an_execution():
    task = make_task()
    out = ask(task, read(q="x"))
    assert out.decision == EXECUTE
    assert out.claim is False
    assert out.fingerprint == fingerprint("search", {"q": "x"}, [])[0]
    assert (task.tool_requests, task.tool_executions) == (1, 1)


def test_a_fresh_write_executes_and_asks_to_claim_the_ledger_row():
    task = make_task()
    out = ask(task, write(to="a@b"))
    assert (out.decision, out.claim) == (EXECUTE, True)


def test_the_window_is_not_touched_at_request_time():
    task = make_task()
    ask(task, read(q="x"))
    assert task.window == [] and task.stagnant == 0


def test_ignore_fields_from_the_tool_policy_apply_to_the_fingerprint():
    task = make_task()
    a = read(q="x", request_id="1")
    a.ignore_fields = ["request_id"]
    seen(task, read(q="x"), times=2)
    assert ask(task, a).decision == BLOCK


# -- steps 1-4 ---------------------------------------------------------------------------------


def test_a_stopped_task_answers_stop_and_counts_nothing():
    task = make_task(state=PARTIAL)
    task.reason = "deadline"
    before = asdict(task)
    out = ask(task, read(q="x"))
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "deadline", False)
    assert asdict(task) == before


def test_a_paused_agent_stops_the_task():
    task = make_task()
    out = ask(task, read(q="x"), paused=True)
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "agent_paused", True)
    assert task.state == STOPPED and task.tool_requests == 0


def test_a_passed_deadline_stops_the_task_before_counting_the_request():
    task = make_task()
    task.deadline_at = NOW
    out = ask(task, read(q="x"))
    assert (task.state, out.reason, task.tool_requests) == (PARTIAL, "deadline", 0)


def test_the_request_budget_stops_the_task_without_counting_the_request():
    task = make_task(max_tool_requests=2)
    task.tool_requests = 2
    out = ask(task, read(q="x"))
    assert (out.reason, task.state, task.tool_requests) == ("request_budget", PARTIAL, 2)


# -- steps 6-7: the ledger ---------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, ""])
def test_a_write_without_an_operation_key_needs_a_human(key):
    task = make_task()
    out = ask(task, write(key=key, to="a@b"))
    assert (out.decision, out.reason, task.state) == (STOP, "missing_operation_key", NEEDS_HUMAN)
    assert out.fingerprint is not None
    assert task.tool_executions == 0


def test_a_read_needs_no_operation_key():
    assert ask(make_task(), read(q="x")).decision == EXECUTE


def test_a_write_whose_key_was_used_with_other_args_is_an_operation_conflict():
    task = make_task()
    row = op(OP_COMMITTED, write(to="someone@else"))
    out = ask(task, write(to="a@b"), row)
    assert (out.reason, task.state) == ("operation_conflict", NEEDS_HUMAN)


def test_a_write_in_flight_under_a_live_lease_waits():
    task = make_task()
    req = write(to="a@b")
    out = ask(task, req, op(IN_FLIGHT, req, lease_live=True))
    assert (out.decision, out.retry_after_ms, out.stopped_now) == (WAIT, 1000, False)
    assert task.state == "RUNNING" and task.tool_executions == 0 and task.tool_requests == 1


def test_a_write_in_flight_with_an_expired_lease_is_an_unknown_commit_and_marks_the_row():
    task = make_task()
    req = write(to="a@b")
    out = ask(task, req, op(IN_FLIGHT, req, lease_live=False))
    assert (out.reason, out.operation_state, task.state) == ("unknown_commit", UNKNOWN, NEEDS_HUMAN)


def test_a_write_whose_commit_is_unknown_is_never_retried_blindly():
    task = make_task()
    req = write(to="a@b")
    out = ask(task, req, op(UNKNOWN, req))
    assert (out.reason, out.operation_state, task.state) == ("unknown_commit", None, NEEDS_HUMAN)
    assert task.tool_executions == 0


def test_a_write_proven_not_committed_may_execute_again_under_its_key():
    task = make_task()
    req = write(to="a@b")
    out = ask(task, req, op(NOT_COMMITTED, req))
    assert (out.decision, out.claim) == (EXECUTE, True)


def test_a_committed_write_is_reused_with_its_stored_result_and_never_executes():
    task = make_task()
    req = write(to="a@b")
    out = ask(task, req, op(OP_COMMITTED, req, result={"id": 7}))
    assert (out.decision, out.result) == (REUSE, {"id": 7})
    assert task.tool_executions == 0
    assert task.stagnant == 1 and [e.fingerprint for e in task.window] == [out.fingerprint]


def test_reusing_a_committed_write_until_stagnant_reaches_the_limit_stops_with_no_progress():
    task = make_task(max_stagnant=2, max_same_call=5)
    req = write(to="a@b")
    row = op(OP_COMMITTED, req, result="done")
    assert ask(task, req, row).decision == REUSE
    out = ask(task, req, row)
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "no_progress", True)
    assert out.result is None


def test_a_committed_write_goes_through_the_loop_checks_before_reuse():
    task = make_task()
    req = write(to="a@b")
    seen(task, req, times=2)
    assert ask(task, req, op(OP_COMMITTED, req, result="r")).decision == BLOCK


def test_the_execution_budget_does_not_apply_to_reuse():
    task = make_task(max_tool_executions=1)
    task.tool_executions = 1
    req = write(to="a@b")
    assert ask(task, req, op(OP_COMMITTED, req)).decision == REUSE


# -- step 8: same call -------------------------------------------------------------------------


def test_the_first_repeat_beyond_max_same_call_is_blocked_with_an_observation():
    task = make_task()
    req = read(q="x")
    fp = seen(task, req, times=2)
    out = ask(task, req)
    assert (out.decision, out.reason, out.trigger, out.stopped_now) == (
        BLOCK,
        "same_call",
        "same_call",
        False,
    )
    assert out.observation["success"] is False
    assert out.observation["code"] == BLOCK_CODE
    assert out.observation["retryable"] is False
    assert "2 times" in out.observation["message"]
    assert "Do not repeat" in out.observation["message"]
    assert task.blocked == [fp]
    assert (task.tool_requests, task.tool_executions, task.stagnant) == (1, 0, 0)
    assert len(task.window) == 2


def test_the_next_identical_request_after_a_block_stops_with_same_call():
    task = make_task()
    req = read(q="x")
    seen(task, req, times=2)
    ask(task, req)
    out = ask(task, req)
    assert (out.decision, out.reason, out.stopped_now, task.state) == (
        STOP,
        "same_call",
        True,
        PARTIAL,
    )


def test_repeat_action_stop_stops_on_the_first_repeat():
    task = make_task(repeat_action="stop")
    req = read(q="x")
    seen(task, req, times=2)
    assert ask(task, req).reason == "same_call"
    assert task.state == PARTIAL


def test_calls_below_max_same_call_execute():
    task = make_task(max_same_call=3)
    req = read(q="x")
    seen(task, req, times=2)
    assert ask(task, req).decision == EXECUTE


# -- step 9: short cycle -----------------------------------------------------------------------


def test_completing_a_second_a_b_repetition_stops_with_short_cycle():
    task = make_task()
    a, b = read(q="a"), read(q="b")
    seen(task, a), seen(task, b), seen(task, a)
    out = ask(task, b)
    assert (out.reason, task.state) == ("short_cycle", PARTIAL)


def test_a_period_three_cycle_is_detected_up_to_max_cycle_period():
    a, b, c = read(q="a"), read(q="b"), read(q="c")
    task = make_task(max_cycle_period=3)
    for req in (a, b, c, a, b):
        seen(task, req)
    assert ask(task, c).reason == "short_cycle"


def test_a_period_longer_than_max_cycle_period_is_not_a_cycle():
    a, b, c = read(q="a"), read(q="b"), read(q="c")
    task = make_task(max_cycle_period=2)
    for req in (a, b, c, a, b):
        seen(task, req)
    assert ask(task, c).decision == EXECUTE


def test_the_same_call_repeated_is_not_a_cycle():
    task = make_task(max_same_call=10)
    req = read(q="a")
    seen(task, req, times=3)
    assert ask(task, req).decision == EXECUTE


def test_a_first_a_b_a_is_not_yet_a_cycle():
    task = make_task()
    a, b = read(q="a"), read(q="b")
    seen(task, a), seen(task, b)
    assert ask(task, a).decision == EXECUTE


# -- step 10: near duplicate -------------------------------------------------------------------


def test_near_duplicates_are_ignored_unless_a_threshold_is_set():
    task = make_task()
    seen(task, read(q="weather in paris"), times=2)
    assert ask(task, read(q="weather in paris!")).decision == EXECUTE


def test_a_near_duplicate_of_a_call_made_max_same_call_times_is_blocked_then_stops():
    task = make_task(near_duplicate_threshold=0.9)
    similar_fp = seen(task, read(q="weather in paris"), times=2)
    out = ask(task, read(q="weather in paris!"))
    assert (out.decision, out.reason, out.trigger) == (BLOCK, "near_duplicate", "near_duplicate")
    assert "nearly identical" in out.observation["message"]
    assert similar_fp in task.blocked  # the whole cluster was nudged once
    out = ask(task, read(q="weather in paris?"))
    assert (out.reason, task.state) == ("near_duplicate", PARTIAL)


def test_a_near_duplicate_of_a_call_seen_fewer_times_executes():
    task = make_task(near_duplicate_threshold=0.9)
    seen(task, read(q="weather in paris"), times=1)
    assert ask(task, read(q="weather in paris!")).decision == EXECUTE


def test_a_dissimilar_call_is_not_a_near_duplicate():
    task = make_task(near_duplicate_threshold=0.9)
    seen(task, read(q="weather in paris"), times=2)
    assert ask(task, read(q="stock price of ACME corp")).decision == EXECUTE


def test_near_duplicates_only_compare_calls_of_the_same_tool():
    task = make_task(near_duplicate_threshold=0.5)
    seen(task, read(tool="lookup", q="weather in paris"), times=2)
    assert ask(task, read(q="weather in paris!")).decision == EXECUTE


def test_the_tool_policy_threshold_overrides_the_task_limit():
    task = make_task(near_duplicate_threshold=None)
    seen(task, read(q="weather in paris"), times=2)
    req = read(q="weather in paris!")
    req.near_duplicate_threshold = 0.9
    assert ask(task, req).decision == BLOCK


def test_near_duplicate_with_repeat_action_stop_stops_at_once():
    task = make_task(near_duplicate_threshold=0.9, repeat_action="stop")
    seen(task, read(q="weather in paris"), times=2)
    assert ask(task, read(q="weather in paris!")).reason == "near_duplicate"


# -- polls -------------------------------------------------------------------------------------


def test_a_status_poll_skips_the_repeat_checks_and_counts_a_poll():
    task = make_task()
    req = read(tool="job_status", job_id="j1", id="j1")
    seen(task, req, times=5)
    out = ask(task, req)
    assert out.decision == EXECUTE
    assert task.polls == 1


def test_polls_beyond_the_poll_budget_stop_the_task():
    task = make_task(max_polls=2)
    req = read(tool="job_status", job_id="j1", id="j1")
    assert ask(task, req).decision == EXECUTE
    assert ask(task, req).decision == EXECUTE
    out = ask(task, req)
    assert (out.reason, task.state, task.polls) == ("poll_budget", PARTIAL, 2)


# -- steps 12-13 -------------------------------------------------------------------------------


def test_the_execution_budget_stops_the_task_before_a_new_execution():
    task = make_task(max_tool_executions=1)
    assert ask(task, read(q="a")).decision == EXECUTE
    out = ask(task, read(q="b"))
    assert (out.reason, task.state, task.tool_executions) == ("execution_budget", PARTIAL, 1)
    assert task.tool_requests == 2


def test_an_executed_call_without_a_result_counts_as_a_repeat():
    task = make_task()
    req = read("search", q="x")
    assert ask(task, req).decision == EXECUTE
    assert ask(task, req).decision == EXECUTE
    assert task.pending == [task.pending[0]] * 2

    assert ask(task, req).decision == BLOCK


def test_a_status_poll_is_never_pending():
    task = make_task()
    poll = read("job_status", job_id="j1", job="j1")
    for _ in range(3):
        assert ask(task, poll).decision == EXECUTE
    assert task.pending == []
