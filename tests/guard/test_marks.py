"""The marks a decision returns for its trace row: what the loop rules counted when the gate
decided (the console shows them as stored, never counts again)."""

from __future__ import annotations

from decimal import Decimal

from agents.guard.fingerprint import action_signature
from agents.guard.model import settle_usage
from agents.guard.terms import BLOCK, EXECUTE, STOP, UsageReport, WindowEntry
from agents.guard.tool import request_tool

from .factories import NOW, agent, make_task, read


def ask(task, req):
    return request_tool(task, req, None, agent(), NOW)


def ran(task, req):
    """The request was executed and its result arrived without progress: it joins the window."""
    outcome = ask(task, req)
    task.pending.remove(outcome.fingerprint)
    task.window.append(WindowEntry(fingerprint=outcome.fingerprint, tool=req.tool))
    return outcome


def test_a_request_is_marked_with_how_often_its_call_is_in_the_window():
    task = make_task(max_same_call=2)
    marks = [ran(task, read(q="x")).marks for _ in range(2)]
    third = ask(task, read(q="x"))

    assert marks == [{"repeat": 1}, {"repeat": 2}]
    assert (third.decision, third.marks) == (BLOCK, {"repeat": 3, "rule": "same_call"})


def test_a_request_that_completes_a_cycle_is_marked_with_its_period():
    task = make_task(max_same_call=5)
    for q in ("a", "b", "a"):
        ran(task, read(q=q))
    fourth = ask(task, read(q="b"))

    assert (fourth.decision, fourth.reason) == (STOP, "short_cycle")
    assert fourth.marks == {"repeat": 2, "rule": "short_cycle", "cycle": 2}


def test_a_status_poll_is_not_marked():
    outcome = ask(make_task(), read(q="x", job_id="job-1"))

    assert outcome.decision == EXECUTE
    assert outcome.marks is None


def test_a_usage_report_is_marked_with_the_same_plan_streak():
    task = make_task()
    signature = action_signature([{"name": "search", "args": {"q": "x"}}])
    usage = UsageReport(Decimal(0), Decimal(0), 0, signature)
    marks = [settle_usage(task, usage, NOW) for _ in range(3)]

    assert [m.marks for m in marks] == [None, {"same_plan": 2}, {"same_plan": 3}]
    assert marks[-1].reason == "repeated_output"
