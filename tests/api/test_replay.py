"""The issue's replay table, driven end to end through the HTTP API.

Each scenario is a recorded agent trace; the test replays it the way an agent would (ask, run
when told, report) and checks the decisions, the final state and how often the tool really ran.
"""

from __future__ import annotations

import pytest

from agents.models import ToolCall
from ledger.models import Operation
from tests.conftest import Caller

from .helpers import (
    assert_stop_is_sticky,
    assert_stopped,
    evidence,
    finish,
    get_task,
    new_task,
    report,
    request_tool,
)

pytestmark = pytest.mark.django_db


def replay(api, task_id, steps):
    """Play (tool, args, effect, extra, result) steps; returns the decisions in order.

    The result is reported only when the answer was EXECUTE, like a well-behaved agent.
    """
    decisions = []
    for tool, args, effect, extra, result in steps:
        answer = request_tool(api, task_id, tool, args, effect, **extra)
        decisions.append(answer["decision"])
        if answer["decision"] == "EXECUTE":
            report(api, task_id, answer["tool_call"], **result)
    return decisions


def executions(task_id) -> int:
    return ToolCall.objects.filter(task_id=task_id, decision="EXECUTE").count()


def read(tool, **args):
    return (tool, args, "read", {}, {"kind": "SUCCESS", "data": {"rows": []}})


def test_the_same_read_retried_runs_twice_is_blocked_then_stops(agent_api):
    task = new_task(agent_api)

    decisions = replay(agent_api, task["id"], [read("search", q="invoice 42")] * 4)

    assert decisions == ["EXECUTE", "EXECUTE", "BLOCK", "STOP"]
    trace = agent_api.get(f"tasks/{task['id']}/trace").body["calls"]
    assert trace[2]["decision"] == "BLOCK"
    body = get_task(agent_api, task["id"])
    assert_stopped(body, "PARTIAL", "same_call", "GUARD_LOOP_DETECTED")
    assert executions(task["id"]) == body["usage"]["tool_executions"] == 2
    assert_stop_is_sticky(agent_api, task["id"])


def test_an_a_b_alternation_runs_three_times_then_stops(agent_api, patient_profile):
    task = new_task(agent_api, profile="patient")
    a, b = read("get_order", id=1), read("get_customer", id=7)

    decisions = replay(agent_api, task["id"], [a, b, a, b, a])

    assert decisions == ["EXECUTE", "EXECUTE", "EXECUTE", "STOP", "STOP"]
    body = get_task(agent_api, task["id"])
    assert_stopped(body, "PARTIAL", "short_cycle", "GUARD_LOOP_DETECTED")
    assert executions(task["id"]) == 3
    assert_stop_is_sticky(agent_api, task["id"])


def test_three_pages_with_verified_progress_complete_the_task(agent_api):
    task = new_task(agent_api)
    pages = [
        (
            "list_invoices",
            {"page": n},
            "read",
            {},
            {
                "kind": "SUCCESS",
                "data": {"page": n},
                "evidence": evidence(n, done=n == 3, milestone=f"page_{n}"),
            },
        )
        for n in (1, 2, 3)
    ]

    decisions = replay(agent_api, task["id"], pages)

    assert decisions == ["EXECUTE", "EXECUTE", "EXECUTE"]
    body = get_task(agent_api, task["id"])
    stop_report = assert_stopped(body, "COMPLETED", "goal_met", None)
    assert body["revision"] == 3
    assert executions(task["id"]) == 3
    assert stop_report["completed"] == ["page_1", "page_2", "page_3"]
    assert_stop_is_sticky(agent_api, task["id"])


def test_changing_args_without_verified_progress_stops_after_three(agent_api):
    task = new_task(agent_api)

    decisions = replay(agent_api, task["id"], [read("search", q=f"invoice {n}") for n in range(5)])

    assert decisions == ["EXECUTE", "EXECUTE", "EXECUTE", "STOP", "STOP"]
    assert_stopped(get_task(agent_api, task["id"]), "PARTIAL", "no_progress", "GUARD_LOOP_DETECTED")
    assert executions(task["id"]) == 3
    assert_stop_is_sticky(agent_api, task["id"])


SEND = (
    "send_email",
    {"to": "ops@example.com"},
    "write",
    {"operation_key": "notice-1"},
    {"kind": "SUCCESS", "data": {"id": "m-1"}, "evidence": evidence(1, committed=True)},
)


def test_a_committed_write_requested_again_runs_once_then_is_reused(
    agent_api, make_agent, client, other_agent_api
):
    task = new_task(agent_api)

    assert replay(agent_api, task["id"], [SEND, SEND]) == ["EXECUTE", "REUSE"]

    restarted = new_task(agent_api)
    assert replay(agent_api, restarted["id"], [SEND]) == ["REUSE"]
    _, token = make_agent("agent-a2", namespace="ns-a")
    sibling = Caller(client, token)
    assert replay(sibling, new_task(sibling)["id"], [SEND]) == ["REUSE"]
    assert ToolCall.objects.filter(tool="send_email", decision="EXECUTE").count() == 1
    # another namespace has its own ledger and does not see the commit
    assert replay(other_agent_api, new_task(other_agent_api)["id"], [SEND]) == ["EXECUTE"]
    assert Operation.objects.filter(operation_key="notice-1").count() == 2


def test_a_write_with_a_lost_response_needs_a_human(agent_api):
    task = new_task(agent_api)
    lost = SEND[:4] + ({"kind": "NO_RESULT", "error": "read timeout"},)

    assert replay(agent_api, task["id"], [lost, SEND]) == ["EXECUTE", "STOP"]

    stop_report = assert_stopped(
        get_task(agent_api, task["id"]), "NEEDS_HUMAN", "unknown_commit", "GUARD_LEDGER"
    )
    assert stop_report["operations"] == [{"key": "notice-1", "state": "UNKNOWN"}]
    assert executions(task["id"]) == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_the_same_key_with_other_input_stops_without_executing(agent_api):
    task = new_task(agent_api)
    other = ("send_email", {"to": "ceo@example.com"}) + SEND[2:]

    assert replay(agent_api, task["id"], [SEND, other]) == ["EXECUTE", "STOP"]

    assert_stopped(
        get_task(agent_api, task["id"]), "NEEDS_HUMAN", "operation_conflict", "GUARD_LEDGER"
    )
    assert executions(task["id"]) == 1
    assert_stop_is_sticky(agent_api, task["id"])


@pytest.mark.parametrize(
    ("kind", "state", "reason", "code"),
    [
        ("FATAL", "FAILED", "fatal", "GUARD_TOOL_FAILED"),
        ("PRECONDITION", "NEEDS_HUMAN", "precondition", "GUARD_TOOL_FAILED"),
    ],
)
def test_a_tool_failure_ends_the_task(agent_api, kind, state, reason, code):
    task = new_task(agent_api)

    decisions = replay(agent_api, task["id"], [("charge", {"id": 1}, "read", {}, {"kind": kind})])

    assert decisions == ["EXECUTE"]
    assert_stopped(get_task(agent_api, task["id"]), state, reason, code)
    assert executions(task["id"]) == 1
    assert_stop_is_sticky(agent_api, task["id"])


def test_a_wait_past_the_deadline_ends_the_task_partial(agent_api):
    task = new_task(agent_api, limits={"deadline_seconds": 30})
    pending = (
        "export",
        {"id": 1},
        "read",
        {},
        {"kind": "PENDING", "job_id": "j-1", "wait_ms": 45_000},
    )

    assert replay(agent_api, task["id"], [pending]) == ["EXECUTE"]

    assert_stopped(get_task(agent_api, task["id"]), "PARTIAL", "deadline", "GUARD_TIME_LIMIT")
    assert_stop_is_sticky(agent_api, task["id"])


def test_budgets_refuse_the_next_work_before_it_starts(agent_api, patient_profile):
    task = new_task(agent_api, profile="patient", limits={"max_tool_executions": 2})

    decisions = replay(agent_api, task["id"], [read("search", q=str(n)) for n in range(3)])

    assert decisions == ["EXECUTE", "EXECUTE", "STOP"]
    assert_stopped(
        get_task(agent_api, task["id"]), "PARTIAL", "execution_budget", "GUARD_ROUND_LIMIT"
    )
    assert executions(task["id"]) == 2
    assert_stop_is_sticky(agent_api, task["id"])


@pytest.mark.parametrize(
    "finish_body",
    [{}, {"answer": "done"}, {"answer": "done", "evidence": {"done": True}}],
    ids=["nothing", "answer done", "done without revision"],
)
def test_the_agents_own_done_never_completes_the_task(agent_api, finish_body):
    task = new_task(agent_api)
    replay(agent_api, task["id"], [read("search", q="x")])

    body = finish(agent_api, task["id"], **finish_body)

    assert_stopped(body, "PARTIAL", "goal_unverified", None)
    assert_stop_is_sticky(agent_api, task["id"])


def test_an_unknown_result_kind_never_completes_the_task(agent_api):
    task = new_task(agent_api)
    weird = ("search", {"q": "x"}, "read", {}, {"kind": "DONE", "evidence": evidence(1, done=True)})

    assert replay(agent_api, task["id"], [weird]) == ["EXECUTE"]

    assert_stopped(get_task(agent_api, task["id"]), "FAILED", "bad_result", "GUARD_BAD_INPUT")
    assert_stop_is_sticky(agent_api, task["id"])
