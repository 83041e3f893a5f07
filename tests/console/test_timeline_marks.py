"""The timeline shows the marks the guard stored on each trace row when it decided.

Traces are played through the same services the runner API calls (so every decision and every
mark is the guard core's), then the task page's timeline is read back: each row shows exactly
the marks stored on its call, and those marks match the decision stored beside them (a call the
guard answered BLOCK or STOP for same_call carries a repeat above the limit, a short_cycle stop
carries a cycle, and a call the guard let through carries neither). BLOCKed calls, pending
calls, polls, reused writes, novelty and evidence progress, a resume, and the labelled traces
of agents.loop_eval are all covered.

The "same plan" marks likewise: model calls are settled through the same services, and each
model call's mark is compared with the guard's repeated-output streak right after its usage
report (the task's stored signatures) and with the usage answer: STOP repeated_output exactly
where the mark reaches the run, through verified progress, status polls, stops and resumes.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from agents import loop_eval
from agents.guard import terms
from agents.guard.model import REPEATED_OUTPUT_RUN
from agents.models import LimitProfile, Task, ToolCall
from agents.services import operator, runner, tasks
from console.timeline import Marks, timeline

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


def shown(stored: dict | None) -> Marks:
    """The marks a row should show for what its call stored."""
    stored = stored or {}
    return Marks(
        repeat=stored.get("repeat", 0), cycle=stored.get("cycle", 0),
        rule=stored.get("rule", ""), same_plan=stored.get("same_plan", 0),
    )  # fmt: skip


def assert_marks_agree(task: Task) -> dict[str, int]:
    """Every mark against the decision on its call; returns how many of each were compared."""
    task.refresh_from_db()
    limit = terms.Limits.from_dict(task.limits).max_same_call
    rows = {row.seq: row for row in timeline(task).rows if row.kind == "tool"}
    assert len(rows) == task.tool_call_rows.count(), "the trace fits one page"
    seen = {"passed": 0, "same_call": 0, "short_cycle": 0}
    for call in task.tool_call_rows.order_by("seq"):
        assert rows[call.seq].marks == shown(call.marks), f"call {call.seq}"
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
    _report(agent, task, late)  # on a stopped task: it leaves pending, joins no window
    operator.task_resume(task_id=task.pk, user=user, reason="go on")
    _step(agent, task, "search", {"q": "price"})
    _step(agent, task, "search", {"q": "price"})
    assert_marks_agree(task)


@pytest.mark.parametrize("trace", loop_eval.load_traces(loop_eval.TUNING_DIR), ids=lambda t: t.name)
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


# -- same plan ---------------------------------------------------------------------------------

PLAN_A = [{"name": "search", "args": {"q": "price"}}]
PLAN_B = [{"name": "search", "args": {"q": "stock"}}]


def _guard_streak(task: Task) -> int:
    """The repeated-output streak as the guard stored it: identical non-empty signatures the
    task's list ends with."""
    task.refresh_from_db()
    run = 0
    for signature in reversed(task.signatures):
        if not signature or signature != task.signatures[-1]:
            break
        run += 1
    return run


def _gate(agent, task: Task):
    _, call, outcome = runner.model_call_gate(task_id=task.pk, agent=agent, model="m")
    assert outcome.decision == terms.ALLOW
    return call


def _usage(agent, task: Task, call, plan) -> tuple[int, terms.Outcome, int]:
    """Report a gated call's usage: (its seq, the usage answer, the guard's streak after it;
    0 when the task was stopped already, which the guard does not count)."""
    _, outcome = runner.model_call_usage(
        task_id=task.pk, agent=agent, model_call_id=call.pk, prompt_tokens=10,
        completion_tokens=5, tool_calls=plan,
    )  # fmt: skip
    counted = outcome.decision != terms.STOP or outcome.stopped_now
    return call.seq, outcome, _guard_streak(task) if counted else 0


def _plan(agent, task: Task, plan) -> tuple[int, terms.Outcome, int]:
    return _usage(agent, task, _gate(agent, task), plan)


def assert_plans_agree(task: Task, answers: list[tuple[int, terms.Outcome, int]]) -> list[int]:
    """Every model call's mark against the guard's streak and its usage answer; returns the
    marks in order."""
    task.refresh_from_db()
    rows = {row.seq: row for row in timeline(task).rows if row.kind == "model"}
    assert len(rows) == task.model_call_rows.count(), "the trace fits one page"
    for call in task.model_call_rows.all():
        assert rows[call.seq].marks == shown(call.marks), f"model call {call.seq}"
    for seq, outcome, streak in answers:
        mark = rows[seq].marks.same_plan
        where = f"model call {seq} ({outcome.decision} {outcome.reason})"
        assert mark == (streak if streak > 1 else 0), where
        stopped_here = outcome.stopped_now and outcome.reason == "repeated_output"
        assert stopped_here == (mark == REPEATED_OUTPUT_RUN), where
    return [rows[seq].marks.same_plan for seq, _, _ in answers]


def test_three_identical_plans_in_a_row(agent):
    task = _task(agent)
    answers = [_plan(agent, task, PLAN_A) for _ in range(3)]
    assert [a[1].decision for a in answers] == [terms.CONTINUE, terms.CONTINUE, terms.STOP]
    assert answers[-1][1].reason == "repeated_output"
    assert assert_plans_agree(task, answers) == [0, 2, 3]


def test_a_different_or_empty_plan_breaks_the_run(agent):
    task = _task(agent)
    plans = [PLAN_A, PLAN_A, PLAN_B, PLAN_A, PLAN_A, None, PLAN_A, PLAN_A]
    answers = [_plan(agent, task, plan) for plan in plans]
    assert all(a[1].decision == terms.CONTINUE for a in answers)
    assert assert_plans_agree(task, answers) == [0, 2, 0, 0, 2, 0, 0, 2]


def test_verified_progress_restarts_the_streak(agent):
    task = _task(agent)
    answers = [_plan(agent, task, PLAN_A) for _ in range(2)]
    _step(agent, task, "edit", {"file": "a.py"}, evidence={"revision": 1, "done": False})
    answers += [_plan(agent, task, PLAN_A) for _ in range(3)]
    decisions = [a[1].decision for a in answers]
    # The same plan after a step forward is the next step: the guard goes on.
    assert decisions == [terms.CONTINUE] * 4 + [terms.STOP]
    assert assert_plans_agree(task, answers) == [0, 2, 0, 2, 3]


def test_novelty_progress_restarts_the_streak(agent):
    task = _task(agent, progress_mode="novelty")
    answers = []
    for page in range(1, 4):
        answers.append(_plan(agent, task, PLAN_A))
        _step(agent, task, "list", {"page": 1}, data={"rows": page})  # new data: progress
    answers += [_plan(agent, task, PLAN_A) for _ in range(2)]
    assert all(a[1].decision == terms.CONTINUE for a in answers)
    assert assert_plans_agree(task, answers) == [0, 0, 0, 0, 2]


def test_a_step_without_progress_does_not_restart_the_streak(agent):
    task = _task(agent)
    answers = []
    for _ in range(3):
        answers.append(_plan(agent, task, PLAN_A))
        _step(agent, task, "search", {"q": "price"})
    assert answers[-1][1].reason == "repeated_output"
    assert assert_plans_agree(task, answers) == [0, 2, 3]


def test_a_status_poll_restarts_the_streak(agent):
    task = _task(agent)
    answers = [_plan(agent, task, PLAN_A) for _ in range(2)]
    _step(agent, task, "status", {"job": "j1"}, job_id="j1", kind=terms.PENDING, wait_ms=10)
    answers += [_plan(agent, task, PLAN_A) for _ in range(2)]
    assert all(a[1].decision == terms.CONTINUE for a in answers)
    assert assert_plans_agree(task, answers) == [0, 2, 0, 2]


def test_a_poll_over_its_budget_does_not_restart_the_streak(agent, make_user):
    user = make_user("olivia", admin=True)[0]
    task = _task(agent, max_polls=0)
    answers = [_plan(agent, task, PLAN_A) for _ in range(2)]
    assert _ask(agent, task, "status", {"job": "j1"}, job_id="j1")[1].reason == "poll_budget"
    operator.task_resume(task_id=task.pk, user=user, reason="go on")
    answers.append(_plan(agent, task, PLAN_A))
    assert answers[-1][1].reason == "repeated_output"
    assert assert_plans_agree(task, answers) == [0, 2, 3]


def test_a_poll_stopped_after_its_budget_check_restarts_the_streak(agent, make_user):
    user = make_user("olivia", admin=True)[0]
    task = _task(agent, max_tool_executions=0)
    answers = [_plan(agent, task, PLAN_A) for _ in range(2)]
    poll = _ask(agent, task, "status", {"job": "j1"}, job_id="j1")[1]
    assert poll.reason == "execution_budget"
    operator.task_resume(task_id=task.pk, user=user, reason="go on")
    answers += [_plan(agent, task, PLAN_A) for _ in range(2)]
    assert all(a[1].decision == terms.CONTINUE for a in answers)
    assert assert_plans_agree(task, answers) == [0, 2, 0, 2]


def test_a_plan_settled_on_a_stopped_task_is_not_counted(agent, make_user):
    user = make_user("olivia", admin=True)[0]
    task = _task(agent)
    answers = [_plan(agent, task, PLAN_A) for _ in range(2)]
    late = _gate(agent, task)
    operator.task_stop(task_id=task.pk, reason="looking", user=user)
    answers.append(_usage(agent, task, late, PLAN_A))  # the money counts, the plan does not
    assert answers[-1][1].decision == terms.STOP
    # A later poll on the stopped task restarts nothing either.
    assert _ask(agent, task, "status", {"job": "j1"}, job_id="j1")[1].decision == terms.STOP
    operator.task_resume(task_id=task.pk, user=user, reason="go on")
    answers.append(_plan(agent, task, PLAN_A))  # the streak outlived the resume
    assert answers[-1][1].reason == "repeated_output"
    assert assert_plans_agree(task, answers) == [0, 2, 0, 3]


def test_a_poll_on_a_task_stopped_for_the_same_reason_restarts_nothing(agent, make_user):
    user = make_user("olivia", admin=True)[0]
    task = _task(agent, max_tool_executions=0)
    answers = [_plan(agent, task, PLAN_A) for _ in range(2)]
    assert _ask(agent, task, "search", {"q": "price"})[1].reason == "execution_budget"
    # Answered with the stored reason, but the task was stopped already: no poll step ran.
    poll = _ask(agent, task, "status", {"job": "j1"}, job_id="j1")[1]
    assert (poll.reason, poll.stopped_now) == ("execution_budget", False)
    operator.task_resume(task_id=task.pk, user=user, reason="go on")
    answers.append(_plan(agent, task, PLAN_A))
    assert answers[-1][1].reason == "repeated_output"
    assert assert_plans_agree(task, answers) == [0, 2, 3]


def test_a_cycle_of_calls_whose_results_never_arrived(agent):
    task = _task(agent)
    for q in ("a", "b", "a"):
        assert _ask(agent, task, "search", {"q": q})[1].decision == terms.EXECUTE
    _, outcome = _ask(agent, task, "search", {"q": "b"})
    assert (outcome.decision, outcome.reason) == (terms.STOP, "short_cycle")
    assert assert_marks_agree(task)["short_cycle"] == 1
    # The request that completed the cycle carries it: the guard decided there.
    cycles = [row.marks.cycle for row in timeline(task).rows if row.kind == "tool"]
    assert cycles == [0, 0, 0, 2]


def test_the_page_shows_each_stored_mark_and_none_on_rows_from_before_marks(agent, as_operator):
    task = _task(agent, max_same_call=3)
    for tool in ("check_stock", "check_supplier", "check_stock", "check_supplier"):
        _step(agent, task, tool, {"sku": "SKU-7"})
    stored = {row.seq: row.marks for row in task.tool_call_rows.all()}
    assert stored[4] == {"repeat": 2, "rule": "short_cycle", "cycle": 2}
    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()
    assert page.count("cycle (2)</span>") == 1
    assert page.count("repeat ×2</span>") == 2
    assert "1 cycle completed" in page and "2 repeats" in page

    # A row written before the guard stored marks (null) shows none, whatever its neighbours.
    task.tool_call_rows.update(marks=None)
    page = as_operator.get(f"/tasks/{task.pk}/").content.decode()
    assert "cycle (2)</span>" not in page and "repeat ×" not in page
