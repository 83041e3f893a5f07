"""Tool results that stop the task: no usable result, bad evidence, bad waits, tool failures."""

from __future__ import annotations

import pytest

from ledger.models import Operation

from .helpers import (
    assert_stop_is_sticky,
    assert_stopped,
    evidence,
    execute,
    get_task,
    new_task,
)

pytestmark = pytest.mark.django_db

KEY = "refund-7"


def run_read(api, task_id, kind, **result):
    """Execute the read and report a `kind` result; the answer to the report."""
    _, answer = execute(api, task_id, "lookup", {"id": 7}, result={"kind": kind, **result})
    return answer


def run_write(api, task_id, kind, **result):
    """Execute the write under KEY and report a `kind` result; the answer to the report."""
    write = {"effect": "write", "operation_key": KEY, "result": {"kind": kind, **result}}
    _, answer = execute(api, task_id, "refund", {"order": 7}, **write)
    return answer


def test_it_fails_a_read_that_gave_no_result(agent_api):
    task = new_task(agent_api)

    answer = run_read(agent_api, task["id"], "NO_RESULT", error="executor crashed")

    stop_report = assert_stopped(answer, "FAILED", "executor_error", "GUARD_BAD_INPUT")
    assert stop_report["usage"]["tool_executions"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_accepts_an_unknown_kind_and_stops_with_bad_result(agent_api):
    task = new_task(agent_api)

    answer = run_read(agent_api, task["id"], "MAYBE", data={"x": 1})

    stop_report = assert_stopped(answer, "FAILED", "bad_result", "GUARD_BAD_INPUT")
    assert stop_report["usage"]["tool_executions"] == 1
    trace = agent_api.get(f"tasks/{task['id']}/trace").body
    assert trace["calls"][0]["result_kind"] == "MAYBE"
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_stops_a_pending_result_that_names_no_job(agent_api):
    task = new_task(agent_api)

    answer = run_read(agent_api, task["id"], "PENDING", wait_ms=100)

    assert_stopped(answer, "FAILED", "bad_result", "GUARD_BAD_INPUT")


def test_it_marks_a_write_with_an_unknown_kind_unknown(agent_api):
    task = new_task(agent_api)

    answer = run_write(agent_api, task["id"], "MAYBE")

    # Like NO_RESULT (the commit is unknown, a human decides) but naming the adapter's fault.
    stop_report = assert_stopped(answer, "NEEDS_HUMAN", "bad_result", "GUARD_BAD_INPUT")
    assert KEY in stop_report["resume_condition"]
    assert Operation.objects.get().state == "UNKNOWN"
    assert answer["report"]["operations"] == [{"key": KEY, "state": "UNKNOWN"}]
    assert_stop_is_sticky(agent_api, task["id"])


@pytest.mark.parametrize(
    "bad",
    [
        {"revision": "1", "done": False},
        {"revision": 1},
        {"revision": 1, "done": 1},
        {"revision": -1, "done": False},
        {"revision": 1, "done": False, "committed": "yes"},
        "verified",
    ],
    ids=[
        "revision as text",
        "no done",
        "done as int",
        "revision backwards",
        "committed as text",
        "a string",
    ],
)
def test_it_fails_a_read_with_invalid_evidence(agent_api, bad):
    task = new_task(agent_api)

    answer = run_read(agent_api, task["id"], "SUCCESS", evidence=bad)

    stop_report = assert_stopped(answer, "FAILED", "invalid_evidence", "GUARD_BAD_INPUT")
    assert stop_report["usage"]["tool_executions"] == 1
    assert get_task(agent_api, task["id"])["revision"] == 0
    assert_stop_is_sticky(agent_api, task["id"])


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"revision": 0}, "evidence['done'] is missing"),
        ({"revision": "1", "done": False}, "evidence['revision'] must be an int, not '1'"),
        ({"revision": 1, "done": False, "committed": "yes"}, "evidence['committed'] must be"),
    ],
)
def test_its_answer_to_invalid_evidence_names_the_field(agent_api, bad, named):
    task = new_task(agent_api)

    answer = run_read(agent_api, task["id"], "SUCCESS", evidence=bad)

    stop_report = assert_stopped(answer, "FAILED", "invalid_evidence", "GUARD_BAD_INPUT")
    assert stop_report["resume_condition"].startswith(f"Fix the verifier: {named}")
    assert get_task(agent_api, task["id"])["report"] == stop_report


def test_its_answer_to_a_write_with_invalid_evidence_names_the_field_and_the_operation(
    agent_api,
):
    task = new_task(agent_api)

    answer = run_write(agent_api, task["id"], "SUCCESS", evidence={"revision": 0, "done": False,
                                                                    "milestone": 3})  # fmt: skip

    stop_report = assert_stopped(answer, "NEEDS_HUMAN", "invalid_evidence", "GUARD_BAD_INPUT")
    assert stop_report["resume_condition"] == (
        "Fix the verifier: evidence['milestone'] must be a str, not 3. "
        f"Reconcile operation {KEY}, then an operator may resume."
    )


def test_it_fails_a_read_whose_evidence_revision_cannot_be_stored(agent_api):
    task = new_task(agent_api)

    answer = run_read(agent_api, task["id"], "SUCCESS", evidence=evidence(2**63))

    assert_stopped(answer, "FAILED", "invalid_evidence", "GUARD_BAD_INPUT")
    assert get_task(agent_api, task["id"])["revision"] == 0


def test_it_stops_at_the_deadline_for_an_absurdly_long_wait(agent_api):
    task = new_task(agent_api)

    answer = run_read(agent_api, task["id"], "RETRYABLE", wait_ms=2**62)

    assert_stopped(answer, "PARTIAL", "deadline", "GUARD_TIME_LIMIT")


def test_it_hands_a_write_with_invalid_evidence_to_a_human(agent_api):
    task = new_task(agent_api)

    answer = run_write(
        agent_api,
        task["id"],
        "SUCCESS",
        evidence={"revision": "1", "done": False, "committed": True},
    )

    stop_report = assert_stopped(answer, "NEEDS_HUMAN", "invalid_evidence", "GUARD_BAD_INPUT")
    assert stop_report["operations"] == [{"key": KEY, "state": "UNKNOWN"}]
    assert Operation.objects.get().state == "UNKNOWN"
    assert_stop_is_sticky(agent_api, task["id"])


@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        ("RETRYABLE", {}),
        ("RETRYABLE", {"wait_ms": 0}),
        ("RETRYABLE", {"wait_ms": -5}),
        ("PENDING", {"job_id": "j1"}),
    ],
    ids=["retryable without wait", "retryable waiting 0", "negative wait", "pending without wait"],
)
def test_it_fails_a_wait_that_is_not_positive(agent_api, kind, extra):
    task = new_task(agent_api)

    answer = run_read(agent_api, task["id"], kind, **extra)

    stop_report = assert_stopped(answer, "FAILED", "invalid_wait", "GUARD_TIME_LIMIT")
    assert stop_report["usage"]["tool_executions"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_fails_the_task_on_a_fatal_tool_error(agent_api):
    task = new_task(agent_api)

    answer = run_read(agent_api, task["id"], "FATAL", code="ACCOUNT_CLOSED", error="closed")

    stop_report = assert_stopped(answer, "FAILED", "fatal", "GUARD_TOOL_FAILED")
    assert stop_report["usage"]["tool_executions"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_hands_a_failed_precondition_to_a_human(agent_api):
    task = new_task(agent_api)

    answer = run_read(agent_api, task["id"], "PRECONDITION", code="NEEDS_APPROVAL")

    stop_report = assert_stopped(answer, "NEEDS_HUMAN", "precondition", "GUARD_TOOL_FAILED")
    assert stop_report["usage"]["tool_executions"] == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_it_records_a_write_proven_not_committed_before_a_fatal_stop(agent_api):
    task = new_task(agent_api)

    answer = run_write(agent_api, task["id"], "FATAL", evidence=evidence(0, committed=False))

    assert_stopped(answer, "FAILED", "fatal", "GUARD_TOOL_FAILED")
    assert Operation.objects.get().state == "NOT_COMMITTED"


def test_it_keeps_a_partial_success_of_a_step_before_the_stop(agent_api):
    task = new_task(agent_api)
    execute(
        agent_api,
        task["id"],
        "lookup",
        {"id": 1},
        result={"kind": "SUCCESS", "evidence": evidence(1, milestone="loaded")},
    )

    answer = run_read(agent_api, task["id"], "FATAL")

    assert answer["report"]["completed"] == ["loaded"]
    assert get_task(agent_api, task["id"])["revision"] == 1
