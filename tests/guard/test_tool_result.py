from __future__ import annotations

from dataclasses import asdict, replace
from datetime import timedelta

import pytest

from agents.guard.core import canonical_json, report_result
from agents.guard.fingerprint import sha256_hex
from agents.guard.terms import (
    COMPLETED,
    CONTINUE,
    FAILED,
    FATAL,
    NEEDS_HUMAN,
    NO_RESULT,
    NOT_COMMITTED,
    OP_COMMITTED,
    PARTIAL,
    PENDING,
    PRECONDITION,
    RETRYABLE,
    RUNNING,
    STOP,
    UNKNOWN,
    ToolResult,
    WindowEntry,
)

from .factories import NOW, call_of, ev, make_task, ok, read, write


def report(task, req, result, now=NOW):
    return report_result(task, call_of(req), result, now)


READ = read(q="x")
WRITE = write(to="a@b")
POLL = read(tool="job_status", job_id="j1", id="j1")


# -- step 1: no usable result ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("req", "result", "state", "reason", "op_state"),
    [
        (READ, ToolResult(kind=NO_RESULT), FAILED, "executor_error", None),
        (WRITE, ToolResult(kind=NO_RESULT), NEEDS_HUMAN, "unknown_commit", UNKNOWN),
        (READ, ToolResult(kind="EXPLODED"), FAILED, "bad_result", None),
        (WRITE, ToolResult(kind="EXPLODED"), NEEDS_HUMAN, "bad_result", UNKNOWN),
        (READ, ToolResult(kind=PENDING, wait_ms=100), FAILED, "bad_result", None),
        (WRITE, ToolResult(kind=PENDING, wait_ms=100), NEEDS_HUMAN, "bad_result", UNKNOWN),
    ],
    ids=[
        "read no result",
        "write no result",
        "read unknown kind",
        "write unknown kind",
        "read pending without job",
        "write pending without job",
    ],
)
def test_an_unusable_result_stops_the_task(req, result, state, reason, op_state):
    task = make_task()
    out = report(task, req, result)
    assert (out.decision, out.reason, out.stopped_now) == (STOP, reason, True)
    assert (task.state, task.reason) == (state, reason)
    assert out.operation_state == op_state
    assert task.window == [] and task.stagnant == 0


def test_a_pending_result_may_name_its_job_on_the_call_instead():
    task = make_task()
    out = report(task, POLL, ToolResult(kind=PENDING, wait_ms=500))
    assert (out.decision, out.wait_ms) == (CONTINUE, 500)


# -- step 2: evidence --------------------------------------------------------------------------


BAD_EVIDENCE = [
    "done",
    ["revision", 1],
    {"done": True},
    {"revision": 1},
    {"revision": True, "done": True},
    {"revision": "2", "done": True},
    {"revision": 1.0, "done": True},
    {"revision": 1, "done": "yes"},
    {"revision": 1, "done": 1},
    {"revision": 1, "done": False, "committed": "true"},
    {"revision": 1, "done": False, "milestone": 3},
]


@pytest.mark.parametrize("evidence", BAD_EVIDENCE, ids=repr)
def test_malformed_evidence_on_a_read_fails_the_task(evidence):
    task = make_task()
    out = report(task, READ, ok(evidence=evidence))
    assert (out.reason, task.state, out.operation_state) == ("invalid_evidence", FAILED, None)


@pytest.mark.parametrize("evidence", BAD_EVIDENCE, ids=repr)
def test_malformed_evidence_on_a_write_needs_a_human_and_leaves_the_commit_unknown(evidence):
    task = make_task()
    out = report(task, WRITE, ok(evidence=evidence))
    assert (out.reason, task.state, out.operation_state) == (
        "invalid_evidence",
        NEEDS_HUMAN,
        UNKNOWN,
    )


def test_evidence_with_a_revision_older_than_the_tasks_is_invalid():
    task = make_task()
    task.revision = 5
    assert report(task, READ, ok(evidence=ev(4))).reason == "invalid_evidence"


def test_evidence_at_the_current_revision_is_valid_but_not_progress():
    task = make_task()
    task.revision = 5
    out = report(task, READ, ok(evidence=ev(5)))
    assert (out.decision, out.progress, task.stagnant) == (CONTINUE, False, 1)


def test_null_optional_evidence_fields_read_as_absent():
    task = make_task()
    out = report(task, READ, ok(evidence=ev(1, committed=None, milestone=None)))
    assert out.decision == CONTINUE and task.milestones == []


# -- step 3: the commit of a write -------------------------------------------------------------


def test_a_write_with_verified_commit_records_the_result_in_the_ledger():
    task = make_task()
    out = report(task, WRITE, ok(data={"id": 1}, evidence=ev(1, committed=True)))
    assert (out.decision, out.operation_state, out.operation_result) == (
        CONTINUE,
        OP_COMMITTED,
        {"id": 1},
    )
    assert out.progress and task.revision == 1


def test_a_write_with_proof_of_no_commit_marks_the_operation_not_committed():
    task = make_task()
    out = report(task, WRITE, ok(evidence=ev(0, committed=False)))
    assert (out.decision, out.operation_state, out.operation_result) == (
        CONTINUE,
        NOT_COMMITTED,
        None,
    )


@pytest.mark.parametrize(
    "result",
    [
        ok(data={"id": 1}),
        ok(evidence=ev(1)),
        ToolResult(kind=RETRYABLE, wait_ms=10, evidence=ev(1, committed=True)),
        ToolResult(kind=FATAL),
    ],
    ids=["success without evidence", "evidence silent on commit", "retryable", "fatal"],
)
def test_a_write_without_proof_either_way_is_an_unknown_commit(result):
    task = make_task()
    out = report(task, WRITE, result)
    assert (out.reason, out.operation_state, task.state) == ("unknown_commit", UNKNOWN, NEEDS_HUMAN)


def test_a_fatal_write_proven_not_committed_fails_with_fatal():
    task = make_task()
    out = report(task, WRITE, ToolResult(kind=FATAL, evidence=ev(0, committed=False)))
    assert (out.reason, out.operation_state, task.state) == ("fatal", NOT_COMMITTED, FAILED)


def test_evidence_committed_is_ignored_for_reads():
    task = make_task()
    out = report(task, READ, ok(evidence=ev(1, committed=True)))
    assert out.operation_state is None and out.decision == CONTINUE


# -- step 4: the tool's verdict ----------------------------------------------------------------


def test_a_fatal_result_fails_the_task():
    task = make_task()
    out = report(task, READ, ToolResult(kind=FATAL, error="boom"))
    assert (out.reason, task.state) == ("fatal", FAILED)


def test_a_failed_precondition_needs_a_human():
    task = make_task()
    out = report(task, READ, ToolResult(kind=PRECONDITION))
    assert (out.reason, task.state) == ("precondition", NEEDS_HUMAN)


# -- step 5: progress --------------------------------------------------------------------------


def test_a_higher_revision_is_progress_and_clears_the_window():
    task = make_task()
    task.stagnant = 2
    task.window = [WindowEntry("old", "search")]
    task.blocked = ["old"]
    out = report(task, READ, ok(evidence=ev(3)))
    assert out.progress is True
    assert task.revision == 3 and task.stagnant == 0 and task.blocked == []
    assert [e.fingerprint for e in task.window] == [call_of(READ).fingerprint]


def test_a_result_without_evidence_is_a_step_without_progress_in_evidence_mode():
    task = make_task()
    out = report(task, READ, ok(data={"rows": [1]}))
    assert (out.decision, out.progress) == (CONTINUE, False)
    assert task.stagnant == 1 and task.revision == 0
    entry = task.window[0]
    assert (entry.fingerprint, entry.tool, entry.args) == (
        call_of(READ).fingerprint,
        "search",
        '{"q":"x"}',
    )


def test_unseen_data_is_progress_in_novelty_mode_and_seen_data_is_not():
    task = make_task(progress_mode="novelty")
    assert report(task, READ, ok(data={"page": 1})).progress is True
    assert task.seen_hashes == [sha256_hex(canonical_json({"page": 1}))]
    assert report(task, READ, ok(data={"page": 1})).progress is False
    assert task.stagnant == 1
    assert report(task, READ, ok(data={"page": 2})).progress is True
    assert task.stagnant == 0


def test_novelty_takes_a_data_hash_sent_alone_as_sent():
    task = make_task(progress_mode="novelty")
    assert report(task, READ, ok(data_hash="h1")).progress is True
    assert report(task, READ, ok(data_hash="h1")).progress is False


def test_novelty_hashes_the_data_when_it_is_sent_and_not_the_data_hash_beside_it():
    # The server knows the tool policy; a client's hash beside the data may not (issue 13).
    task = make_task(progress_mode="novelty")
    assert report(task, READ, ok(data={"a": 1}, data_hash="h1")).progress is True
    assert report(task, READ, ok(data={"a": 2}, data_hash="h1")).progress is True
    assert report(task, READ, ok(data={"a": 2}, data_hash="h2")).progress is False


def test_novelty_without_data_is_not_progress():
    task = make_task(progress_mode="novelty")
    assert report(task, READ, ok()).progress is False


def test_evidence_decides_even_in_novelty_mode():
    task = make_task(progress_mode="novelty")
    task.revision = 2
    out = report(task, READ, ok(data={"new": True}, evidence=ev(2)))
    assert out.progress is False and task.seen_hashes == []


def test_novelty_never_moves_the_revision():
    task = make_task(progress_mode="novelty")
    report(task, READ, ok(data=[1]))
    assert task.revision == 0


def test_a_pending_result_leaves_stagnant_and_the_window_alone():
    task = make_task()
    task.stagnant = 2
    out = report(task, POLL, ToolResult(kind=PENDING, job_id="j1", wait_ms=100, evidence=ev(4)))
    assert (out.decision, out.progress, out.wait_ms) == (CONTINUE, False, 100)
    assert task.stagnant == 2 and task.window == [] and task.revision == 0


def test_milestones_from_valid_evidence_are_kept_once_in_order():
    task = make_task()
    report(task, READ, ok(evidence=ev(1, milestone="loaded")))
    report(task, READ, ok(evidence=ev(2, milestone="validated")))
    report(task, READ, ok(evidence=ev(3, milestone="loaded")))
    assert task.milestones == ["loaded", "validated"]


# -- steps 6-7 ---------------------------------------------------------------------------------


def test_done_evidence_completes_the_task_with_goal_met():
    task = make_task()
    out = report(task, READ, ok(evidence=ev(2, done=True, milestone="all")))
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "goal_met", True)
    assert (task.state, task.revision, task.milestones) == (COMPLETED, 2, ["all"])


def test_done_evidence_on_a_committed_write_completes_and_still_commits():
    task = make_task()
    out = report(task, WRITE, ok(data="sent", evidence=ev(1, done=True, committed=True)))
    assert (task.state, out.operation_state, out.operation_result) == (
        COMPLETED,
        OP_COMMITTED,
        "sent",
    )


def test_reaching_max_stagnant_steps_without_progress_stops_with_no_progress():
    task = make_task(max_stagnant=2)
    assert report(task, READ, ok()).decision == CONTINUE
    out = report(task, read(q="y"), ok())
    assert (out.reason, task.state, task.stagnant) == ("no_progress", PARTIAL, 2)


# -- step 8: retry and wait --------------------------------------------------------------------


def test_a_retryable_result_continues_with_its_wait_and_counts_a_retry():
    task = make_task(max_stagnant=10)
    out = report(task, READ, ToolResult(kind=RETRYABLE, wait_ms=250))
    assert (out.decision, out.wait_ms, task.retries) == (CONTINUE, 250, 1)
    assert task.stagnant == 1


def test_retries_from_every_layer_draw_on_one_budget():
    task = make_task(max_stagnant=10, max_retries=3)
    assert report(task, READ, ToolResult(kind=RETRYABLE, wait_ms=10, attempts=3)).decision == (
        CONTINUE
    )
    out = report(task, READ, ToolResult(kind=RETRYABLE, wait_ms=10, attempts=1))
    assert (out.reason, task.state, task.retries) == ("retry_budget", PARTIAL, 4)


@pytest.mark.parametrize("attempts", [0, -3, None, True])
def test_a_retryable_result_counts_at_least_one_attempt(attempts):
    task = make_task(max_stagnant=10)
    report(task, READ, ToolResult(kind=RETRYABLE, wait_ms=10, attempts=attempts))
    assert task.retries == 1


@pytest.mark.parametrize("kind", [RETRYABLE, PENDING])
@pytest.mark.parametrize("wait_ms", [None, 0, -5, True, 1.5, "100"])
def test_a_wait_must_be_a_positive_integer(kind, wait_ms):
    task = make_task(max_stagnant=10)
    out = report(task, POLL, ToolResult(kind=kind, job_id="j1", wait_ms=wait_ms))
    assert (out.reason, task.state) == ("invalid_wait", FAILED)


def test_a_wait_reaching_the_deadline_stops_with_deadline():
    task = make_task(deadline_in=10, max_stagnant=10)
    out = report(task, READ, ToolResult(kind=RETRYABLE, wait_ms=10_000))
    assert (out.reason, task.state) == ("deadline", PARTIAL)


def test_a_wait_ending_just_before_the_deadline_continues():
    task = make_task(deadline_in=10, max_stagnant=10)
    out = report(task, READ, ToolResult(kind=RETRYABLE, wait_ms=9_999))
    assert out.decision == CONTINUE


def test_a_success_has_no_wait():
    task = make_task()
    assert report(task, READ, ok(wait_ms=500)).wait_ms is None


# -- a result on a stopped task ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("req", "result", "op_state", "op_result"),
    [
        (WRITE, ok(data="r", evidence=ev(0, committed=True)), OP_COMMITTED, "r"),
        (WRITE, ok(evidence=ev(0, committed=False)), NOT_COMMITTED, None),
        (WRITE, ok(data="r"), UNKNOWN, None),
        (WRITE, ToolResult(kind=NO_RESULT), UNKNOWN, None),
        (WRITE, ok(evidence={"revision": "x"}), UNKNOWN, None),
        (READ, ok(evidence=ev(9, done=True)), None, None),
    ],
    ids=["committed", "not committed", "unproven", "no result", "bad evidence", "read"],
)
def test_a_result_on_a_stopped_task_only_reports_the_ledger_change(
    req, result, op_state, op_result
):
    task = make_task(state=PARTIAL)
    task.reason = "deadline"
    before = asdict(task)
    out = report(task, req, result)
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "deadline", False)
    assert (out.operation_state, out.operation_result) == (op_state, op_result)
    assert asdict(task) == before


@pytest.mark.parametrize("req", [READ, WRITE], ids=["read", "write"])
def test_a_result_on_a_stopped_task_takes_its_call_out_of_the_pending_set(req):
    # The call ran and reported: it is no longer in flight, stopped task or not. Left pending,
    # it would count as a repeat of itself for ever after a resume (nothing else removes it:
    # the lease sweep skips a reported call).
    task = make_task(state=PARTIAL)
    task.reason = "deadline"
    fp = call_of(req).fingerprint
    task.pending = [fp, "another-call"]
    before = asdict(task)
    out = report(task, req, ok(data="r"))
    assert (out.decision, out.reason, out.stopped_now) == (STOP, "deadline", False)
    assert task.pending == ["another-call"]
    after = asdict(task)
    before.pop("pending"), after.pop("pending")
    assert after == before  # nothing else moves: no counter, no window entry


def test_a_released_call_reporting_late_on_a_stopped_task_removes_no_pending_entry():
    task = make_task(state=PARTIAL)
    task.reason = "deadline"
    view = replace(call_of(READ), in_flight=False)  # its claim expired: already released
    task.pending = [view.fingerprint]  # a second execution of the same call, still running
    report_result(task, view, ok(data="r"), NOW)
    assert task.pending == [view.fingerprint]


def test_a_result_keeps_the_task_running_when_nothing_stops_it():
    task = make_task()
    report(task, READ, ok(evidence=ev(1)))
    assert task.state == RUNNING and task.reason is None


def test_the_result_outcome_carries_the_calls_fingerprint():
    task = make_task()
    assert report(task, READ, ok()).fingerprint == call_of(READ).fingerprint


def test_a_result_arriving_after_the_deadline_is_still_judged():
    task = make_task(deadline_in=1)
    out = report(task, READ, ok(evidence=ev(1, done=True)), now=NOW + timedelta(hours=1))
    assert out.reason == "goal_met"
