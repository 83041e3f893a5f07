"""The thin client without a server: answer parsing, and the tool/loop logic against scripted
answers (httpx.MockTransport). Tests against a live server live elsewhere."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.client import (
    AsyncClient,
    Client,
    LoopwardenError,
    Plan,
    TaskStopped,
    ToolReport,
    _Call,
    arun,
    error_from_response,
    parse_response,
    run,
)

BASE = "http://lw.test/api/v1"
TASK = "7f0c1c2e-0000-4000-8000-000000000001"
STOP_REPORT = {"state": "PARTIAL", "reason": "same_call", "code": "GUARD_LOOP_DETECTED"}


class Script:
    """A fake server answering a fixed sequence of (method, path, status, body)."""

    def __init__(self, *steps: tuple[str, str, int, Any]) -> None:
        self.steps = list(steps)
        self.sent: list[tuple[str, str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert self.steps, f"unexpected request {request.method} {request.url}"
        method, path, status, body = self.steps.pop(0)
        sent_path = request.url.raw_path.decode().split("?")[0].removeprefix("/api/v1/")
        assert (request.method, sent_path) == (method, path)
        assert request.headers["authorization"] == "Bearer tok"
        self.sent.append((method, path, json.loads(request.content) if request.content else None))
        return httpx.Response(status, json=body)


def client_for(script: Script) -> Client:
    return Client(BASE, "tok", transport=httpx.MockTransport(script))


def tool_path(suffix: str = "") -> str:
    return f"tasks/{TASK}/tool-calls{suffix}"


# -- parsing -----------------------------------------------------------------------------------


def test_an_error_envelope_becomes_a_loopwarden_error():
    response = httpx.Response(
        400, json={"error": {"code": "INVALID_FIELDS", "message": "bad", "fields": {"goal": "x"}}}
    )
    error = error_from_response(response)
    assert (error.status, error.code, error.message, error.fields) == (
        400,
        "INVALID_FIELDS",
        "bad",
        {"goal": "x"},
    )


def test_a_trigger_loop_keeps_its_code():
    script = Script(("POST", "tasks", 429, {"error": {"code": "TRIGGER_LOOP", "message": "m"}}))
    with pytest.raises(LoopwardenError) as caught:
        client_for(script).create_task("g", trigger_key="cron")
    assert (caught.value.status, caught.value.code) == (429, "TRIGGER_LOOP")


def test_an_error_without_envelope_gets_an_http_code():
    error = error_from_response(httpx.Response(502, text="<html>Bad gateway</html>"))
    assert (error.code, error.message) == ("HTTP_502", "<html>Bad gateway</html>")
    error = error_from_response(httpx.Response(401, json={"detail": "No token."}))
    assert (error.code, error.message) == ("HTTP_401", "No token.")


def test_stop_raises_task_stopped_only_on_guard_endpoints():
    answer = httpx.Response(200, json={"decision": "STOP", "report": STOP_REPORT})
    gate = _Call("gate_model_call", "POST", "x", task_id=TASK, stop_raises=True)
    with pytest.raises(TaskStopped) as caught:
        parse_response(gate, answer)
    stop = caught.value
    assert (stop.state, stop.reason, stop.code, stop.task_id) == (
        "PARTIAL",
        "same_call",
        "GUARD_LOOP_DETECTED",
        TASK,
    )
    assert stop.report == STOP_REPORT
    assert parse_response(_Call("get_task", "GET", "x"), answer)["decision"] == "STOP"


def test_the_decision_hook_sees_every_decision_before_a_stop():
    seen = []
    answer = httpx.Response(200, json={"decision": "STOP", "report": STOP_REPORT})
    call = _Call("request_tool", "POST", "x", {"tool": "t"}, stop_raises=True)
    with pytest.raises(TaskStopped):
        parse_response(call, answer, lambda *args: seen.append(args))
    assert seen == [("request_tool", {"tool": "t"}, {"decision": "STOP", "report": STOP_REPORT})]


def test_list_endpoints_unwrap_their_items():
    script = Script(
        ("GET", "tasks", 200, {"tasks": [{"id": "a"}]}),
        ("GET", "operations", 200, [{"id": 1}]),
        ("GET", "operations", 200, {"results": [{"id": 2}]}),
    )
    client = client_for(script)
    assert client.list_tasks(state="RUNNING") == [{"id": "a"}]
    assert client.list_operations() == [{"id": 1}]
    assert client.list_operations(state="UNKNOWN") == [{"id": 2}]


def test_paths_are_quoted_and_none_fields_are_not_sent():
    script = Script(
        ("POST", "agents/a%2Fb/pause", 200, {}),
        ("POST", f"tasks/{TASK}/stop", 200, {"state": "STOPPED"}),
    )
    client = client_for(script)
    client.pause_agent("a/b", "runaway")
    client.stop(TASK)
    assert script.sent[0][2] == {"reason": "runaway"}
    assert script.sent[1][2] == {}


# -- the tool flow -----------------------------------------------------------------------------


def test_a_tool_executes_and_reports_the_verified_evidence():
    script = Script(
        ("POST", tool_path(), 200, {"decision": "EXECUTE", "tool_call": 7}),
        ("POST", tool_path("/7/result"), 200, {"decision": "CONTINUE"}),
    )
    session = client_for(script).session(TASK)
    message = session.tool(
        "fetch",
        {"page": 1},
        lambda args: {"page": args["page"]},
        inspect=lambda data: {"revision": data["page"], "done": False},
    )
    assert message == {"success": True, "data": {"page": 1}}
    result = script.sent[1][2]
    assert result["kind"] == "SUCCESS"
    assert result["evidence"] == {"revision": 1, "done": False}
    assert result["data"] == {"page": 1}


def test_a_tool_waits_for_another_writer_then_reuses_its_result():
    script = Script(
        ("POST", tool_path(), 200, {"decision": "WAIT", "tool_call": 1, "retry_after_ms": 250}),
        ("POST", tool_path(), 200, {"decision": "REUSE", "tool_call": 2, "result": {"id": 9}}),
    )
    slept: list[float] = []
    session = client_for(script).session(TASK, sleep=slept.append)
    message = session.tool(
        "pay", {}, lambda a: pytest.fail("must not run"), effect="write", operation_key="k"
    )
    assert message == {"success": True, "reused": True, "data": {"id": 9}}
    assert slept == [0.25]
    assert script.sent[0][2]["operation_key"] == "k"


def test_waiting_is_bounded():
    wait = ("POST", tool_path(), 200, {"decision": "WAIT", "tool_call": 1, "retry_after_ms": 1})
    script = Script(wait, wait, wait)
    session = client_for(script).session(TASK, sleep=lambda s: None, max_wait_tries=3)
    message = session.tool("pay", {}, lambda a: 1, effect="write", operation_key="k")
    assert message["code"] == "OPERATION_IN_FLIGHT"


def test_a_block_becomes_the_tool_message():
    observation = {
        "success": False,
        "code": "DUPLICATE_TOOL_CALL_BLOCKED",
        "retryable": False,
        "message": "Do not repeat it.",
    }
    script = Script(
        (
            "POST",
            tool_path(),
            200,
            {"decision": "BLOCK", "tool_call": 3, "observation": observation},
        )
    )
    assert client_for(script).session(TASK).tool("s", {}, lambda a: 1) == observation


def test_an_exception_is_reported_as_no_result_and_the_stop_raised():
    script = Script(
        ("POST", tool_path(), 200, {"decision": "EXECUTE", "tool_call": 4}),
        ("POST", tool_path("/4/result"), 200, {"decision": "STOP", "report": STOP_REPORT}),
    )

    def execute(args: dict[str, Any]) -> Any:
        raise TimeoutError("no answer")

    with pytest.raises(TaskStopped) as caught:
        client_for(script).session(TASK).tool("pay", {}, execute, effect="write", operation_key="k")
    assert isinstance(caught.value.__cause__, TimeoutError)
    result = script.sent[1][2]
    assert (result["kind"], result["error"]) == ("NO_RESULT", "TimeoutError: no answer")


def test_a_continue_with_wait_ms_is_slept_and_a_tool_report_is_sent_as_is():
    script = Script(
        ("POST", tool_path(), 200, {"decision": "EXECUTE", "tool_call": 5}),
        ("POST", tool_path("/5/result"), 200, {"decision": "CONTINUE", "wait_ms": 1500}),
    )
    slept: list[float] = []
    session = client_for(script).session(TASK, sleep=slept.append)
    report = ToolReport(kind="PENDING", job_id="job-1", wait_ms=1500)
    message = session.tool("export", {}, lambda a: report)
    assert slept == [1.5]
    assert message["retryable"] is True and message["job_id"] == "job-1"
    assert script.sent[1][2] == {
        "kind": "PENDING",
        "job_id": "job-1",
        "wait_ms": 1500,
        "attempts": 1,
        "duration_ms": script.sent[1][2]["duration_ms"],
    }


def test_a_model_call_reports_its_usage_even_when_the_body_fails():
    script = Script(
        ("POST", f"tasks/{TASK}/model-calls", 200, {"decision": "ALLOW", "model_call": 3}),
        ("POST", f"tasks/{TASK}/model-calls/3/usage", 200, {"decision": "CONTINUE"}),
    )
    session = client_for(script).session(TASK)
    with pytest.raises(RuntimeError), session.model_call(model="m") as call:
        call.usage(10, 2, tool_calls=[{"name": "t", "args": {}, "effect": "read"}])
        raise RuntimeError("parse error")
    assert script.sent[1][2] == {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "tool_calls": [{"name": "t", "args": {}}],
    }
    assert session.last_model_call == 3


# -- the loop ----------------------------------------------------------------------------------


def loop_script(*, stop_on_result: bool) -> Script:
    result = (
        {"decision": "STOP", "report": STOP_REPORT} if stop_on_result else {"decision": "CONTINUE"}
    )
    return Script(
        ("POST", f"tasks/{TASK}/model-calls", 200, {"decision": "ALLOW", "model_call": 1}),
        ("POST", f"tasks/{TASK}/model-calls/1/usage", 200, {"decision": "CONTINUE"}),
        ("POST", tool_path(), 200, {"decision": "EXECUTE", "tool_call": 1}),
        ("POST", tool_path("/1/result"), 200, result),
        ("GET", f"tasks/{TASK}", 200, {"id": TASK, "state": "PARTIAL", "report": STOP_REPORT}),
    )


def test_run_returns_the_task_with_its_report_when_the_guard_stops_it():
    script = loop_script(stop_on_result=True)
    plans: list[list[dict[str, Any]]] = []

    def plan(history: list[dict[str, Any]]) -> Plan:
        plans.append(list(history))
        return Plan(tool_calls=[{"name": "s", "args": {"q": 1}}], prompt_tokens=5)

    task = run(client_for(script), TASK, plan, lambda name, args: {"hits": []})
    assert task["report"] == STOP_REPORT
    assert script.sent[1][2]["tool_calls"] == [{"name": "s", "args": {"q": 1}}]
    assert script.sent[2][2]["model_call"] == 1


def test_run_stops_the_task_when_it_runs_out_of_rounds():
    script = loop_script(stop_on_result=False)
    script.steps[-1] = ("POST", f"tasks/{TASK}/stop", 200, {"id": TASK, "state": "STOPPED"})
    plan = Plan(tool_calls=[{"name": "s", "args": {}}])
    task = run(client_for(script), TASK, lambda h: plan, lambda n, a: 1, max_rounds=1)
    assert task["state"] == "STOPPED"
    assert "1 rounds" in script.sent[-1][2]["reason"]


def test_arun_accepts_async_plan_and_execute():
    script = loop_script(stop_on_result=True)

    async def plan(history: list[dict[str, Any]]) -> dict[str, Any]:
        return {"tool_calls": [{"name": "s", "args": {}}]}

    async def execute(name: str, args: dict[str, Any]) -> Any:
        return {"ok": True}

    async def main() -> dict[str, Any]:
        async with AsyncClient(BASE, "tok", transport=httpx.MockTransport(script)) as client:
            return await arun(client, TASK, plan, execute, lambda n, a, d: None)

    assert asyncio.run(main())["state"] == "PARTIAL"
    assert script.sent[3][2]["data"] == {"ok": True}


def test_the_sync_client_refuses_async_tools():
    script = Script(
        ("POST", tool_path(), 200, {"decision": "EXECUTE", "tool_call": 6}),
        ("POST", tool_path("/6/result"), 200, {"decision": "STOP", "report": STOP_REPORT}),
    )

    async def execute(args: dict[str, Any]) -> Any:
        return 1

    with pytest.raises(TaskStopped):
        client_for(script).session(TASK).tool("t", {}, execute)
    assert script.sent[1][2]["kind"] == "NO_RESULT"
    assert "AsyncTaskSession" in script.sent[1][2]["error"]


def test_the_client_imports_without_django_settings():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    code = "import sys, agents.client; assert 'django' not in sys.modules"
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True)
