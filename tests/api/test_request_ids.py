"""A decision request's `request_id`: a repeat with the same id within the task answers the
first answer and counts nothing, so a client may resend any request whose answer it lost."""

from __future__ import annotations

import pytest

from agents.models import Event, ModelCall, SeenHash, Task, ToolCall
from ledger.models import Operation
from tests.api.helpers import (
    NOTICE,
    NOTICE_KEY,
    evidence,
    gate,
    get_task,
    new_task,
    report,
    request_tool,
    settle,
)

COUNTERS = ("model_calls", "tool_requests", "tool_executions", "retries", "polls", "tokens_used",
            "tokens_reserved", "cost_spent", "cost_reserved", "revision", "stagnant", "state",
            "reason", "window", "pending", "report", "phase")  # fmt: skip


def counted(task_id: str) -> dict:
    """Every counter of the task and every row a decision writes."""
    task = Task.objects.get(pk=task_id)
    return {
        **{name: getattr(task, name) for name in COUNTERS},
        "model_call_rows": list(ModelCall.objects.filter(task_id=task_id).values()),
        "tool_call_rows": list(ToolCall.objects.filter(task_id=task_id).values()),
        "events": Event.objects.filter(task_id=task_id).count(),
        "operations": list(Operation.objects.values()),
        "seen_hashes": SeenHash.objects.filter(task_id=task_id).count(),
    }


def twice(api, path: str, body: dict) -> tuple[dict, dict, dict, dict]:
    """Send `body` twice under one request_id: both answers, and the counts after each."""
    first = api.post(path, {**body, "request_id": "req-1"})
    assert first.status_code == 200, first.body
    after_first = counted(path.split("/")[1])
    again = api.post(path, {**body, "request_id": "req-1"})
    assert again.status_code == 200, again.body
    return first.body, again.body, after_first, counted(path.split("/")[1])


@pytest.fixture
def task_id(agent_api):
    return new_task(agent_api)["id"]


def test_a_repeated_model_call_gate_answers_the_same_call_and_reserves_once(agent_api, task_id):
    first, again, before, after = twice(
        agent_api, f"tasks/{task_id}/model-calls", {"model": "m", "est_prompt_tokens": 100}
    )

    assert first["decision"] == "ALLOW" and again == first
    assert after == before
    assert before["model_calls"] == 1 and len(before["model_call_rows"]) == 1


def test_a_repeated_usage_report_answers_the_same_and_charges_once(agent_api, task_id):
    call = gate(agent_api, task_id, model="m")["model_call"]

    first, again, before, after = twice(
        agent_api, f"tasks/{task_id}/model-calls/{call}/usage",
        {"prompt_tokens": 100, "completion_tokens": 20},
    )  # fmt: skip

    assert first == again == {"decision": "CONTINUE"}
    assert after == before and before["tokens_used"] == 120


def test_a_repeated_tool_request_answers_the_same_call_and_counts_once(agent_api, task_id):
    first, again, before, after = twice(
        agent_api, f"tasks/{task_id}/tool-calls",
        {"tool": "send_email", "args": NOTICE, "effect": "write", "operation_key": NOTICE_KEY},
    )  # fmt: skip

    assert first["decision"] == "EXECUTE" and again == first
    assert after == before
    assert before["tool_requests"] == 1 and len(before["tool_call_rows"]) == 1


def test_a_repeated_tool_result_answers_the_same_and_settles_once(agent_api, task_id):
    call = request_tool(agent_api, task_id, "send_email", NOTICE, "write",
                        operation_key=NOTICE_KEY)["tool_call"]  # fmt: skip

    first, again, before, after = twice(
        agent_api, f"tasks/{task_id}/tool-calls/{call}/result",
        {"kind": "SUCCESS", "data": {"sent": 1}, "evidence": evidence(1, committed=True)},
    )  # fmt: skip

    assert first == again == {"decision": "CONTINUE", "revision": 1}
    assert after == before and before["tool_executions"] == 1
    assert [op["state"] for op in before["operations"]] == ["COMMITTED"]


def test_a_repeated_finish_answers_the_first_task_and_ends_it_once(agent_api, task_id):
    first, again, before, after = twice(
        agent_api, f"tasks/{task_id}/finish", {"answer": "done", "evidence": evidence(0)}
    )

    assert first["state"] == "PARTIAL" and again == first
    assert after == before


def test_a_repeated_stop_answer_is_the_first_report(agent_api, task_id):
    """A gate on a stopped task is a trace row; its repeat writes none, and answers the report
    the first answer carried."""
    agent_api.post(f"tasks/{task_id}/stop", {})

    first, again, before, after = twice(agent_api, f"tasks/{task_id}/model-calls", {})

    assert first["decision"] == "STOP" and again == first
    assert after == before and len(before["model_call_rows"]) == 1


def test_a_repeat_answers_the_first_answer_even_after_the_task_moved_on(agent_api, task_id):
    body = {"tool": "search", "args": {"q": "x"}, "effect": "read", "request_id": "r-9"}
    first = agent_api.post(f"tasks/{task_id}/tool-calls", body).body
    report(agent_api, task_id, first["tool_call"], evidence=evidence(1))
    request_tool(agent_api, task_id, "search", {"q": "y"})

    again = agent_api.post(f"tasks/{task_id}/tool-calls", body)

    assert again.status_code == 200 and again.body == first
    assert get_task(agent_api, task_id)["usage"]["tool_requests"] == 2


def test_the_same_id_with_another_body_is_refused_and_changes_nothing(agent_api, task_id):
    path = f"tasks/{task_id}/tool-calls"
    agent_api.post(path, {"tool": "search", "args": {"q": "x"}, "effect": "read",
                          "request_id": "r-1"})  # fmt: skip
    before = counted(task_id)

    other = agent_api.post(path, {"tool": "search", "args": {"q": "y"}, "effect": "read",
                                  "request_id": "r-1"})  # fmt: skip

    assert other.status_code == 409, other.body
    assert other.body["error"]["code"] == "REQUEST_ID_REUSED"
    assert counted(task_id) == before


def test_the_same_id_on_another_endpoint_is_refused(agent_api, task_id):
    gate(agent_api, task_id, request_id="r-1")

    other = agent_api.post(
        f"tasks/{task_id}/tool-calls",
        {"tool": "search", "args": {}, "effect": "read", "request_id": "r-1"},
    )

    assert other.status_code == 409 and other.body["error"]["code"] == "REQUEST_ID_REUSED"


def test_ids_are_per_task(agent_api, task_id):
    other = new_task(agent_api)["id"]
    gate(agent_api, task_id, request_id="r-1")

    answer = gate(agent_api, other, request_id="r-1")

    assert answer["decision"] == "ALLOW"
    assert get_task(agent_api, other)["usage"]["model_calls"] == 1


def test_different_ids_count_each_request(agent_api, task_id):
    gate(agent_api, task_id, request_id="r-1")
    gate(agent_api, task_id, request_id="r-2")
    gate(agent_api, task_id)
    gate(agent_api, task_id)

    assert get_task(agent_api, task_id)["usage"]["model_calls"] == 4


def test_a_blank_id_is_no_id(agent_api, task_id):
    gate(agent_api, task_id, request_id="")
    gate(agent_api, task_id, request_id="")

    assert get_task(agent_api, task_id)["usage"]["model_calls"] == 2


@pytest.mark.parametrize("request_id", [7, None, "x" * 201])
def test_a_bad_id_is_a_400(agent_api, task_id, request_id):
    answer = agent_api.post(f"tasks/{task_id}/model-calls", {"request_id": request_id})

    assert answer.status_code == 400 and "request_id" in answer.body["error"]["fields"]
    assert get_task(agent_api, task_id)["usage"]["model_calls"] == 0


def test_a_refusal_is_not_remembered(agent_api, task_id):
    """An error changed nothing: sent again under its id, the request is decided again."""
    call = gate(agent_api, task_id)["model_call"]
    settle(agent_api, task_id, call)
    path = f"tasks/{task_id}/model-calls/{call}/usage"
    body = {"prompt_tokens": 1, "completion_tokens": 1, "request_id": "late"}

    assert agent_api.post(path, body).status_code == 409
    assert agent_api.post(path, body).body["error"]["code"] == "USAGE_ALREADY_REPORTED"


def test_a_report_with_text_the_database_cannot_hold_is_answered_again(agent_api, task_id):
    call = request_tool(agent_api, task_id, "search", {"q": "x"})["tool_call"]
    body = {"kind": "SUCCESS", "data": {"t": "a\u0000b"}, "evidence": evidence(1),
            "request_id": "nul\u0000id"}  # fmt: skip
    path = f"tasks/{task_id}/tool-calls/{call}/result"

    first = agent_api.post(path, body)
    again = agent_api.post(path, body)

    assert first.status_code == again.status_code == 200, again.body
    assert again.body == first.body


def test_a_reuse_answer_is_repeated_with_its_stored_result(agent_api, task_id):
    call = request_tool(agent_api, task_id, "send_email", NOTICE, "write",
                        operation_key=NOTICE_KEY)["tool_call"]  # fmt: skip
    report(agent_api, task_id, call, data={"id": "m-\u0000"}, evidence=evidence(1, committed=True))
    other = new_task(agent_api)["id"]

    first, again, before, after = twice(
        agent_api, f"tasks/{other}/tool-calls",
        {"tool": "send_email", "args": NOTICE, "effect": "write", "operation_key": NOTICE_KEY},
    )  # fmt: skip

    assert first["decision"] == "REUSE" and first["result"] == {"id": "m-\u0000"}
    assert again == first and after == before


def test_repeats_across_a_stop_a_verdict_and_a_resume_answer_the_first_answers(
    agent_api, operator_api, task_id
):
    """Answers lost in phase 1 and sent again after an operator reconciled the lost write and
    resumed the task: each repeat answers what phase 1 answered and counts nothing; the late
    repeat of the write's NO_RESULT leaves the COMMITTED verdict alone, so the key is REUSEd."""
    allowed = gate(agent_api, task_id, request_id="g1")
    settled = settle(agent_api, task_id, allowed["model_call"], request_id="u1")
    read = request_tool(agent_api, task_id, "search", {"q": 1}, request_id="t1")
    read_result = report(agent_api, task_id, read["tool_call"], request_id="r1")
    write = request_tool(agent_api, task_id, "send_email", NOTICE, "write",
                         operation_key=NOTICE_KEY, request_id="t2")  # fmt: skip
    lost = report(agent_api, task_id, write["tool_call"], "NO_RESULT", request_id="r2")
    assert lost["decision"] == "STOP", lost
    operation = Operation.objects.get(operation_key=NOTICE_KEY)
    verdict = {"verdict": "COMMITTED", "note": "the provider shows it", "result": {"id": 7}}
    assert operator_api.post(f"operations/{operation.pk}/reconcile", verdict).status_code == 200
    assert operator_api.post(f"tasks/{task_id}/resume", {"reason": "sent"}).status_code == 200
    before = counted(task_id)

    assert gate(agent_api, task_id, request_id="g1") == allowed
    assert settle(agent_api, task_id, allowed["model_call"], request_id="u1") == settled
    assert request_tool(agent_api, task_id, "search", {"q": 1}, request_id="t1") == read
    assert report(agent_api, task_id, read["tool_call"], request_id="r1") == read_result
    assert report(agent_api, task_id, write["tool_call"], "NO_RESULT", request_id="r2") == lost

    assert counted(task_id) == before
    assert get_task(agent_api, task_id)["state"] == "RUNNING"
    assert request_tool(agent_api, task_id, "send_email", NOTICE, "write",
                        operation_key=NOTICE_KEY)["result"] == {"id": 7}  # fmt: skip


def test_a_repeated_finish_after_a_resume_answers_the_first_and_ends_nothing(
    agent_api, operator_api, task_id
):
    first = agent_api.post(f"tasks/{task_id}/finish", {"answer": "done", "request_id": "f1"})
    assert first.body["state"] == "PARTIAL", first.body
    assert operator_api.post(f"tasks/{task_id}/resume", {"reason": "not done"}).status_code == 200
    before = counted(task_id)

    again = agent_api.post(f"tasks/{task_id}/finish", {"answer": "done", "request_id": "f1"})

    assert again.status_code == 200 and again.body == first.body
    assert counted(task_id) == before
    assert get_task(agent_api, task_id)["state"] == "RUNNING"
