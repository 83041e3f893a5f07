"""The timeline's loop marks agree with the guard's decisions, step by step.

Traces are played through the same services the runner API calls (so every decision is the
guard core's), then the task page's timeline is read back and each tool call's marks are
compared with the decision stored on that call: a call the guard answered BLOCK or STOP for
same_call carries a repeat above the limit, a short_cycle stop carries a cycle, and a call the
guard let through carries neither. BLOCKed calls, pending calls, polls, reused writes, novelty
and evidence progress, a resume, and the labelled traces of agents.loop_eval are all covered.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from agents import loop_eval
from agents.guard import terms
from agents.models import LimitProfile, Task, ToolCall
from agents.services import operator, runner, tasks
from console.timeline import timeline

# The repetition rules run after these request checks; a call they stopped earlier says
# nothing about the window (the guard never asked).
REACHED_REPETITION = {terms.EXECUTE, terms.REUSE, terms.BLOCK}
STOPPED_AT_OR_AFTER_REPETITION = {
    "same_call", "short_cycle", "near_duplicate", "execution_budget", "no_progress",
}  # fmt: skip
LOOP_RULES = ("same_call", "short_cycle")

_names = itertools.count()


def _task(agent, **limits: Any) -> Task:
    name = f"p{next(_names)}"
    loose = {"max_stagnant": 50, "max_tool_requests": 200, "max_tool_executions": 200}
    agent.allowed_profiles.add(LimitProfile.objects.create(name=name, **{**loose, **limits}))
    return tasks.task_create(agent=agent, goal="replay", profile=name)


def _ask(
    agent, task: Task, tool: str, args: dict, **request: Any
) -> tuple[ToolCall, terms.Outcome]:
    _, call, outcome = runner.tool_call_request(
        task_id=task.pk, agent=agent, tool=tool, args=args,
        effect=request.pop("effect", terms.READ), **request,
    )  # fmt: skip
    return call, outcome


def _report(agent, task: Task, call: ToolCall, **result: Any) -> terms.Outcome:
    result.setdefault("kind", terms.SUCCESS)
    _, _, outcome = runner.tool_call_result(
        task_id=task.pk, agent=agent, tool_call_id=call.pk, result=terms.ToolResult(**result)
    )
    return outcome


def _step(agent, task: Task, tool: str, args: dict, **result: Any) -> terms.Outcome:
    """Ask, and when EXECUTE'd report `result` at once (an agent calling one tool at a time)."""
    call, outcome = _ask(agent, task, tool, args, job_id=result.pop("job_id", None))
    if outcome.decision == terms.EXECUTE:
        return _report(agent, task, call, **result)
    return outcome


def assert_marks_agree(task: Task) -> dict[str, int]:
    """Every mark against the decision on its call; returns how many of each were compared."""
    task.refresh_from_db()
    limit = terms.Limits.from_dict(task.limits).max_same_call
    rows = {row.seq: row for row in timeline(task).rows if row.kind == "tool"}
    assert len(rows) == task.tool_call_rows.count(), "the trace fits one page"
    seen = {"passed": 0, "same_call": 0, "short_cycle": 0}
    for call in task.tool_call_rows.order_by("seq"):
        if not call.fingerprint or call.job_id:
            continue
        reached = call.decision in REACHED_REPETITION or (
            call.decision == terms.STOP and call.reason in STOPPED_AT_OR_AFTER_REPETITION
        )
        if not reached:
            continue
        marks = rows[call.seq].marks
        fired = call.reason if call.reason in LOOP_RULES else ""
        where = f"call {call.seq} ({call.tool}, {call.decision} {call.reason})"
        assert marks.rule == fired, where
        if fired == "same_call":
            assert marks.repeat > limit, where
        elif fired == "short_cycle":
            assert marks.cycle >= 2, where
        else:
            assert marks.repeat <= limit, where
        seen[fired or "passed"] += 1
    return seen


def test_blocks_are_not_window_steps(agent):
    task = _task(agent)
    decisions = [_step(agent, task, "search", {"q": "price"}).decision for _ in range(4)]
    assert decisions == [terms.CONTINUE, terms.CONTINUE, terms.BLOCK, terms.STOP]
    # The fourth ask meets the same window as the third: two done, the BLOCK did not count.
    seen = assert_marks_agree(task)
    assert seen == {"passed": 2, "same_call": 2, "short_cycle": 0}
    marks = [row.marks.repeat for row in timeline(task).rows if row.kind == "tool"]
    assert marks == [1, 2, 3, 3]


def test_blocks_do_not_make_a_cycle(agent):
    task = _task(agent, max_same_call=1)
    for q in ("a", "a", "b", "a", "b"):
        _step(agent, task, "search", {"q": q}, data={"q": q})
    assert assert_marks_agree(task)["same_call"] >= 1


def test_novelty_progress_clears_the_window(agent):
    task = _task(agent, progress_mode="novelty")
    for page in range(1, 5):  # new data each time: progress, never a repeat
        answer = _step(agent, task, "list", {"page": 1}, data={"rows": page})
        assert answer.decision == terms.CONTINUE
    for _ in range(3):  # the same data again: the window fills
        _step(agent, task, "list", {"page": 1}, data={"rows": 4})
    assert assert_marks_agree(task) == {"passed": 5, "same_call": 2, "short_cycle": 0}


def test_evidence_progress_clears_the_window(agent):
    task = _task(agent)
    for revision in (1, 2, 3):
        _step(agent, task, "edit", {"file": "a.py"}, evidence={"revision": revision, "done": False})
    for _ in range(3):
        _step(agent, task, "edit", {"file": "a.py"}, evidence={"revision": 3, "done": False})
    assert assert_marks_agree(task) == {"passed": 4, "same_call": 2, "short_cycle": 0}


def test_a_cycle_counts_only_what_ran(agent):
    task = _task(agent, max_same_call=3)
    for tool in ("check_stock", "check_supplier", "check_stock", "check_supplier"):
        _step(agent, task, tool, {"sku": "SKU-7"})
    assert assert_marks_agree(task)["short_cycle"] == 1


def test_a_cycle_around_a_blocked_call(agent):
    task = _task(agent, max_same_call=1, max_cycle_period=3)
    for tool in ("a", "b", "b", "a", "b", "c", "a"):
        _step(agent, task, tool, {})
    assert_marks_agree(task)


def test_pending_calls_count_and_polls_do_not(agent):
    task = _task(agent)
    first, _ = _ask(agent, task, "search", {"q": "x"})  # executed, no result yet
    second, outcome = _ask(agent, task, "search", {"q": "x"})
    assert outcome.decision == terms.EXECUTE
    assert _ask(agent, task, "search", {"q": "x"})[1].decision == terms.BLOCK  # two in flight
    for _ in range(3):
        _step(agent, task, "status", {"job": "j1"}, job_id="j1", kind=terms.PENDING, wait_ms=10)
    _report(agent, task, first)
    _report(agent, task, second)
    assert assert_marks_agree(task)["same_call"] == 1


def test_a_reused_write_joins_the_window(agent):
    task = _task(agent)
    write = {"effect": terms.WRITE, "operation_key": "pay-1"}
    call, _ = _ask(agent, task, "pay", {"invoice": 1}, **write)
    _report(agent, task, call, evidence={"revision": 1, "done": False, "committed": True})
    decisions = [_ask(agent, task, "pay", {"invoice": 1}, **write)[1].decision for _ in range(3)]
    # The executed call and the reuse: two.
    assert decisions == [terms.REUSE, terms.BLOCK, terms.STOP]
    assert assert_marks_agree(task) == {"passed": 2, "same_call": 2, "short_cycle": 0}


def test_the_window_survives_a_resume(agent, make_user):
    user = make_user("olivia", admin=True)[0]
    task = _task(agent, max_same_call=2)
    for _ in range(4):
        _step(agent, task, "search", {"q": "price"})
    task.refresh_from_db()
    assert task.reason == "same_call"
    operator.task_resume(task_id=task.pk, user=user, reason="try once more")
    _step(agent, task, "search", {"q": "other"})
    _step(agent, task, "search", {"q": "price"})  # still two in the window: stops at once
    task.refresh_from_db()
    assert task.reason == "same_call"
    assert assert_marks_agree(task)["same_call"] == 3


def test_a_late_result_on_a_stopped_task_does_not_join(agent, make_user):
    user = make_user("olivia", admin=True)[0]
    task = _task(agent)
    _step(agent, task, "search", {"q": "price"})
    late, _ = _ask(agent, task, "search", {"q": "price"})
    operator.task_stop(task_id=task.pk, reason="looking", user=user)
    _report(agent, task, late)  # on a stopped task: neither the window nor pending moves
    operator.task_resume(task_id=task.pk, user=user, reason="go on")
    _step(agent, task, "search", {"q": "price"})
    _step(agent, task, "search", {"q": "price"})
    assert_marks_agree(task)


@pytest.mark.parametrize("trace", loop_eval.load_traces(), ids=lambda t: t.name)
def test_the_labelled_traces(agent, trace):
    """The loop_eval traces (realistic loops and legitimate work), replayed through the
    services with the exact rules only."""
    task = _task(agent, max_stagnant=10_000, max_polls=1000, max_retries=1000)
    for item in trace.calls:
        result = {
            "kind": item.get("kind", terms.SUCCESS), "data": item.get("data"),
            "wait_ms": item.get("wait_ms"), "evidence": item.get("evidence"),
        }  # fmt: skip
        outcome = _step(
            agent, task, item["tool"], item.get("args") or {}, job_id=item.get("job_id"), **result
        )
        if outcome.decision == terms.STOP:
            break
    assert_marks_agree(task)
