"""Checks 1-3 of both gates (terminal, agent paused, deadline): the same answers, in the same
order, whether the agent asks for a model call or for a tool."""

from __future__ import annotations

from dataclasses import asdict
from decimal import Decimal

import pytest

from agents.guard.core import gate_model_call, request_tool
from agents.guard.terms import (
    ALLOW,
    EXECUTE,
    FAILED,
    PARTIAL,
    STOP,
    STOPPED,
    ModelCallRequest,
)

from .factories import NOW, agent, make_task, read


def model_gate(task, paused):
    return gate_model_call(
        task, ModelCallRequest(estimate_cost=Decimal("0")), agent(paused=paused), NOW
    )


def tool_request(task, paused):
    return request_tool(task, read(q="x"), None, agent(paused=paused), NOW)


GATES = pytest.mark.parametrize("ask", [model_gate, tool_request], ids=["model", "tool"])


@GATES
def test_a_terminal_task_answers_its_stored_stop_even_when_paused_and_late(ask):
    task = make_task(state=FAILED)
    task.reason = "fatal"
    task.deadline_at = NOW
    before = asdict(task)

    out = ask(task, paused=True)

    assert (out.decision, out.reason, out.stopped_now) == (STOP, "fatal", False)
    assert asdict(task) == before


@GATES
def test_a_paused_agent_comes_before_a_passed_deadline(ask):
    task = make_task()
    task.deadline_at = NOW

    out = ask(task, paused=True)

    assert (out.decision, out.reason, out.stopped_now) == (STOP, "agent_paused", True)
    assert (task.state, task.reason) == (STOPPED, "agent_paused")
    assert (task.model_calls, task.tool_requests) == (0, 0)


@GATES
def test_a_passed_deadline_stops_before_anything_is_counted(ask):
    task = make_task(max_model_calls=0, max_tool_requests=0)
    task.deadline_at = NOW

    out = ask(task, paused=False)

    assert (out.decision, out.reason, out.stopped_now) == (STOP, "deadline", True)
    assert (task.state, task.reason) == (PARTIAL, "deadline")
    assert (task.model_calls, task.tool_requests) == (0, 0)


@GATES
def test_a_running_task_of_a_live_agent_within_its_deadline_goes_on(ask):
    task = make_task()

    out = ask(task, paused=False)

    assert out.decision in (ALLOW, EXECUTE)
    assert task.state == "RUNNING"
