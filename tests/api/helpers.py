"""Steps an agent takes through the runner API, and the checks every API test repeats.

Each helper asserts the HTTP status it expects, so a test reads as the agent's loop and fails
at the first answer that was not what the contract says.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from agents.models import Event, ModelCall, Task, ToolCall
from ledger.models import Operation, Reconciliation

# The write most ledger tests send: one business action, one operation key.
NOTICE = {"to": "ops@example.com", "incident": 42}
NOTICE_KEY = "incident-42-first-notice"


def _body(response, status: int = 200) -> dict:
    """The answer's body, after checking it came with `status` (else fail showing the body)."""
    assert response.status_code == status, response.body
    return response.body


def new_task(api, **body: Any) -> dict:
    return _body(api.post("tasks", {"goal": "Close incident 42", **body}), 201)


def get_task(api, task_id: str) -> dict:
    return _body(api.get(f"tasks/{task_id}"))


def gate(api, task_id: str, **body: Any) -> dict:
    return _body(api.post(f"tasks/{task_id}/model-calls", body))


def settle(
    api,
    task_id: str,
    model_call: int,
    *,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    **body: Any,
) -> dict:
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, **body}
    return _body(api.post(f"tasks/{task_id}/model-calls/{model_call}/usage", usage))


def request_tool(
    api,
    task_id: str,
    tool: str = "search",
    args: dict | None = None,
    effect: str = "read",
    **extra: Any,
) -> dict:
    body = {"tool": tool, "args": {} if args is None else args, "effect": effect, **extra}
    return _body(api.post(f"tasks/{task_id}/tool-calls", body))


def send_notice(api, task_id: str) -> dict:
    """Request the NOTICE write under its operation key."""
    return request_tool(api, task_id, "send_email", NOTICE, "write", operation_key=NOTICE_KEY)


def report(api, task_id: str, tool_call: int, kind: str = "SUCCESS", **extra: Any) -> dict:
    return _body(
        api.post(f"tasks/{task_id}/tool-calls/{tool_call}/result", {"kind": kind, **extra})
    )


def execute(
    api,
    task_id: str,
    tool: str = "search",
    args: dict | None = None,
    effect: str = "read",
    *,
    result: dict | None = None,
    **extra: Any,
) -> tuple[dict, dict]:
    """Request a tool, expect EXECUTE, report `result` (default: a plain SUCCESS)."""
    asked = request_tool(api, task_id, tool, args, effect, **extra)
    assert asked["decision"] == "EXECUTE", asked
    answered = report(api, task_id, asked["tool_call"], **(result or {"kind": "SUCCESS"}))
    return asked, answered


def evidence(revision: int, done: bool = False, **extra: Any) -> dict:
    return {"revision": revision, "done": done, **extra}


def finish(api, task_id: str, **body: Any) -> dict:
    return _body(api.post(f"tasks/{task_id}/finish", body))


def move_deadline_to_the_past(task_id: str) -> None:
    Task.objects.filter(pk=task_id).update(deadline_at=timezone.now() - timedelta(seconds=1))


def row_counts() -> dict[str, int]:
    """How many rows each trace and ledger table holds: a 400 must leave them all alone."""
    return {
        "tasks": Task.objects.count(),
        "model_calls": ModelCall.objects.count(),
        "tool_calls": ToolCall.objects.count(),
        "events": Event.objects.count(),
        "operations": Operation.objects.count(),
        "reconciliations": Reconciliation.objects.count(),
    }


def snapshot(api, task_id: str) -> dict:
    """Everything about a task that a call must not change once it is stopped."""
    body = get_task(api, task_id)
    keep = (
        "state",
        "reason",
        "code",
        "phase",
        "limits",
        "usage",
        "remaining",
        "revision",
        "stagnant",
        "report",
        "deadline_at",
    )
    return {key: body[key] for key in keep}


def assert_stopped(body: dict, state: str, reason: str, code: str | None) -> dict:
    """The task (or STOP answer) carries the state, reason and code; returns the report."""
    stop_report = body["report"]
    assert body["state"] == state, body
    assert body["reason"] == reason, body
    assert stop_report["state"] == state
    assert stop_report["reason"] == reason
    assert stop_report["code"] == code
    if "code" in body:
        assert body["code"] == code
    return stop_report


def assert_stop_is_sticky(api, task_id: str) -> dict:
    """Gate, tool request and finish on a stopped task answer the stored report, count nothing.

    Returns the stored report so the caller can check its content.
    """
    before = snapshot(api, task_id)
    stored = before["report"]
    assert stored is not None and before["state"] != "RUNNING", before

    answer = gate(api, task_id, model="gpt-x", est_prompt_tokens=10, max_output_tokens=10)
    assert answer["decision"] == "STOP"
    assert answer["report"] == stored

    answer = request_tool(api, task_id, "search", {"q": "after the stop"})
    assert answer["decision"] == "STOP"
    assert answer["report"] == stored

    answer = request_tool(api, task_id, "send", {"to": "x"}, "write", operation_key="after-stop")
    assert answer["decision"] == "STOP"
    assert answer["report"] == stored

    answer = finish(api, task_id, evidence=evidence(999, done=True), answer="done")
    assert answer["state"] == before["state"]
    assert answer["report"] == stored

    assert snapshot(api, task_id) == before
    assert not Operation.objects.filter(operation_key="after-stop").exists()
    return stored
