"""Novelty that sees through volatile fields in results (issue 13).

A read answered with a fresh stamp each time (`fetched_at`, a request id, an etag) is the same
answer: with the default limits it is nudged once and then stopped as same_call, the check
docs/DESIGN.md section 4 puts first, instead of running to the execution budget.
"""

from __future__ import annotations

import pytest

from agents.models import LimitProfile, ToolCall, ToolPolicy
from tests.conftest import allow_profiles

from .helpers import assert_stopped, evidence, execute, get_task, new_task, report, request_tool

pytestmark = pytest.mark.django_db


@pytest.fixture
def novelty_task(agent_api, agent):
    LimitProfile.objects.update_or_create(name="novelty", defaults={"progress_mode": "novelty"})
    allow_profiles(agent[1].name, "novelty")
    return new_task(agent_api, profile="novelty")


def stamped(second: int, **extra) -> dict:
    return {"rows": [{"id": 7, "total": 120}], "fetched_at": f"2026-11-30T10:00:{second:02}Z",
            **extra}  # fmt: skip


def read_until_not_executed(api, task_id: str, answer_of, tool: str = "search") -> list[str]:
    """Ask for the same read until the guard stops executing it; the decisions, in order."""
    decisions = []
    for step in range(25):
        asked = request_tool(api, task_id, tool, {"q": "invoice 7"})
        decisions.append(asked["decision"])
        if asked["decision"] != "EXECUTE":
            if asked["decision"] == "STOP":
                return decisions
            continue
        answered = report(api, task_id, asked["tool_call"], "SUCCESS", data=answer_of(step))
        decisions.append(answered["decision"])
        if answered["decision"] == "STOP":
            return decisions
    return decisions


def test_a_read_with_a_fresh_fetched_at_each_time_stops_as_same_call(agent_api, novelty_task):
    task_id = novelty_task["id"]

    decisions = read_until_not_executed(agent_api, task_id, stamped)

    assert decisions == ["EXECUTE", "CONTINUE", "EXECUTE", "CONTINUE", "BLOCK", "STOP"]
    task = get_task(agent_api, task_id)
    assert_stopped(task, "PARTIAL", "same_call", "GUARD_LOOP_DETECTED")
    assert task["usage"]["tool_executions"] == 2


def test_stamps_are_matched_in_any_spelling_and_at_any_depth(agent_api, novelty_task):
    def answer(step):
        meta = {"X-Request-Id": f"req-{step}", "traceId": step, "fetchedAt": step}
        return {"items": [{"id": 1, "ETag": f"W/{step}"}], "meta": meta}

    decisions = read_until_not_executed(agent_api, novelty_task["id"], answer)

    assert decisions[-2:] == ["BLOCK", "STOP"]
    assert get_task(agent_api, novelty_task["id"])["reason"] == "same_call"


def test_pagination_whose_pages_carry_new_rows_still_completes(agent_api, novelty_task):
    task_id = novelty_task["id"]
    calls = []
    for page in range(1, 9):
        data = {"page": page, "items": [{"id": page * 10 + n} for n in range(3)],
                "next_cursor": f"c{page + 1}", "fetched_at": f"10:00:{page:02}"}  # fmt: skip
        last = page == 8
        asked, answered = execute(
            agent_api, task_id, "list_invoices", {"cursor": f"c{page}"},
            result={"kind": "SUCCESS", "data": data,
                    **({"evidence": evidence(1, done=True)} if last else {})},
        )  # fmt: skip
        calls.append(asked["tool_call"])
        assert answered["decision"] == ("STOP" if last else "CONTINUE"), answered

    task = get_task(agent_api, task_id)
    assert (task["state"], task["reason"]) == ("COMPLETED", "goal_met")
    # The task page says which keys made each page new; the stamp is never one of them.
    assert ToolCall.objects.get(pk=calls[1]).novel_keys == ["items", "next_cursor", "page"]
    assert ToolCall.objects.get(pk=calls[0]).novel_keys == ["items", "next_cursor", "page"]


def test_a_switched_off_default_is_honoured(agent_api, novelty_task):
    ToolPolicy.objects.create(tool="search", ignore_volatile_keys=False)

    decisions = read_until_not_executed(agent_api, novelty_task["id"], stamped)

    # Every stamp is new data again: only the execution budget bounds the read (the issue).
    assert decisions == ["EXECUTE", "CONTINUE"] * 20 + ["STOP"]
    assert get_task(agent_api, novelty_task["id"])["reason"] == "execution_budget"
    reported = ToolCall.objects.filter(task_id=novelty_task["id"], result_kind="SUCCESS")
    assert reported.last().novel_keys == ["fetched_at"]


def test_the_policy_s_ignore_result_fields_are_left_out_too(agent_api, novelty_task):
    ToolPolicy.objects.create(tool="search", ignore_result_fields=["served_by", "meta.shard"])

    decisions = read_until_not_executed(
        agent_api, novelty_task["id"],
        lambda step: stamped(step, served_by=f"node-{step}", meta={"shard": step, "v": 1}),
    )  # fmt: skip

    assert decisions == ["EXECUTE", "CONTINUE", "EXECUTE", "CONTINUE", "BLOCK", "STOP"]


def test_the_server_hashes_data_it_is_sent_and_takes_a_data_hash_alone_as_sent(
    agent_api, novelty_task
):
    task_id = novelty_task["id"]
    sent = [
        {"kind": "SUCCESS", "data": stamped(1), "data_hash": "client-1"},
        {"kind": "SUCCESS", "data": stamped(2), "data_hash": "client-2"},  # the same data
        {"kind": "SUCCESS", "data_hash": "client-2"},  # never seen: the server kept its own
    ]
    first, second, third = (
        execute(agent_api, task_id, "search", {"q": q}, result=result)[1]
        for q, result in zip("abc", sent, strict=True)
    )

    assert (first["decision"], second["decision"], third["decision"]) == ("CONTINUE",) * 3
    rows = ToolCall.objects.filter(task_id=task_id).order_by("seq")
    assert [r.novel_keys for r in rows] == [["rows"], None, []]
