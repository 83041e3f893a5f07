"""`AsyncClient`, `AsyncTaskSession` and `arun` against a live server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loopwarden_client import (
    AsyncClient,
    LoopwardenError,
    Plan,
    TaskStopped,
    ToolReport,
    arun,
    run,
)

from agents.guard import terms
from agents.models import ModelCall, ToolCall
from ledger.models import Operation


def test_the_async_client_drives_every_agent_endpoint(api_url, agent_token):
    async def main() -> dict[str, Any]:
        async with AsyncClient(api_url, agent_token) as client:
            task = await client.create_task("async export", limits={"max_tool_executions": 5})
            task_id = task["id"]
            allowed = await client.gate_model_call(task_id, model="m", est_prompt_tokens=10)
            await client.report_usage(task_id, allowed["model_call"], prompt_tokens=10,
                                      completion_tokens=2)  # fmt: skip
            answer = await client.request_tool(task_id, "fetch", {"page": 1},
                                               model_call=allowed["model_call"])  # fmt: skip
            reply = await client.report_result(task_id, answer["tool_call"], "SUCCESS",
                                               evidence={"revision": 1, "done": False})  # fmt: skip
            assert reply["decision"] == terms.CONTINUE
            listed = await client.list_tasks(state=terms.RUNNING)
            trace = await client.trace(task_id)
            with pytest.raises(LoopwardenError) as bad:
                await client.request_tool(task_id, "fetch", {}, effect="erase")
            assert bad.value.code == "INVALID_FIELDS"
            finished = await client.finish(task_id, evidence={"revision": 1, "done": True})
            fetched = await client.get_task(task_id)
            with pytest.raises(TaskStopped):
                await client.gate_model_call(task_id)
            return {"listed": listed, "trace": trace, "finished": finished, "fetched": fetched}

    seen = asyncio.run(main())
    assert [t["id"] for t in seen["listed"]] == [seen["finished"]["id"]]
    assert [c["type"] for c in seen["trace"]["calls"]] == ["model_call", "tool_call"]
    assert seen["finished"]["state"] == seen["fetched"]["state"] == terms.COMPLETED


def test_an_async_call_left_without_usage_warns_at_the_callers_line(api_url, agent_token):
    async def main() -> int:
        async with AsyncClient(api_url, agent_token) as client:
            session = client.session((await client.create_task("async forgetful"))["id"])
            async with session.model_call() as call:
                pass
            return call.model_call

    with pytest.warns(UserWarning, match="left without usage") as warned:
        model_call = asyncio.run(main())
    assert ModelCall.objects.get(pk=model_call).settled_at is None
    assert {w.filename for w in warned if "left without usage" in str(w.message)} == {__file__}


def test_the_async_session_wraps_model_calls_and_tools(api_url, agent_token):
    async def send(args: dict[str, Any]) -> ToolReport:
        await asyncio.sleep(0)
        return ToolReport(data={"id": "m-1"},
                          evidence={"revision": 1, "done": False, "committed": True})  # fmt: skip

    async def main() -> tuple[Any, ...]:
        async with AsyncClient(api_url, agent_token) as client:
            session = client.session((await client.create_task("async notify"))["id"])
            async with session.model_call(model="m") as call:
                call.usage(5, 5, tool_calls=[{"name": "send", "args": {"to": "a"}}])
            kwargs = {"effect": "write", "operation_key": "notify-a"}
            first = await session.tool("send", {"to": "a"}, send, **kwargs)
            again = await session.tool("send", {"to": "a"}, send, **kwargs)

            async def broken(args: dict[str, Any]) -> Any:
                raise ConnectionError("reset by peer")

            with pytest.raises(TaskStopped) as caught:
                await session.tool("send", {"to": "b"}, broken, effect="write",
                                   operation_key="notify-b")  # fmt: skip
            return session.task_id, call, first, again, caught.value

    task_id, call, first, again, stopped = asyncio.run(main())
    assert call.answer == {"decision": terms.CONTINUE}
    assert first == {"success": True, "data": {"id": "m-1"}}
    assert again == {"success": True, "reused": True, "data": {"id": "m-1"}}
    assert isinstance(stopped.__cause__, ConnectionError)
    assert (stopped.state, stopped.reason) == (terms.NEEDS_HUMAN, "unknown_commit")
    assert Operation.objects.get(operation_key="notify-b").state == terms.UNKNOWN
    assert ToolCall.objects.filter(task_id=task_id, model_call=call.model_call).count() == 3


def test_arun_accepts_async_plan_execute_and_inspect(api_url, agent_token):
    async def plan(history: list[dict[str, Any]]) -> Plan:
        done = sum(1 for item in history if item["role"] == "tool")
        return Plan(tool_calls=[{"name": "fetch", "args": {"page": done + 1}}])

    async def execute(name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"page": args["page"]}

    async def inspect(name: str, args: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        return {"revision": data["page"], "done": data["page"] == 2}

    async def main() -> dict[str, Any]:
        async with AsyncClient(api_url, agent_token) as client:
            task_id = (await client.create_task("async loop"))["id"]
            return await arun(client, task_id, plan, execute, inspect)

    task = asyncio.run(main())
    assert (task["state"], task["revision"]) == (terms.COMPLETED, 2)


def test_the_sync_session_refuses_an_awaitable_answer_as_no_result(lw):
    async def execute(args: dict[str, Any]) -> Any:
        return 1

    session = lw.session(lw.create_task("wrong driver")["id"])
    with pytest.raises(TaskStopped):  # a plain function handing back a coroutine: seen late
        session.tool("fetch", {}, lambda args: execute(args))
    call = ToolCall.objects.get(task_id=session.task_id)
    assert call.result_kind == terms.NO_RESULT and "AsyncTaskSession" in call.result_error


def test_the_sync_session_refuses_an_async_write_before_asking_the_guard(lw):
    """An `async def` tool cannot run under the sync driver, and that is known before the
    guard is asked: asking first counted an execution and reported NO_RESULT, so a write that
    never ran became UNKNOWN and its task NEEDS_HUMAN, for an operator to reconcile nothing."""

    async def pay(args: dict[str, Any]) -> Any:
        pytest.fail("an async tool never runs under the sync session")

    session = lw.session(lw.create_task("wrong driver for a write")["id"])
    with pytest.raises(TypeError, match="AsyncTaskSession"):
        session.tool("pay", {"invoice": "INV-1"}, pay, effect="write", operation_key="pay-INV-1")
    with pytest.raises(TypeError, match="AsyncTaskSession"):
        session.tool("fetch", {}, lambda args: 1, inspect=pay)
    with pytest.raises(TypeError, match="arun"):
        run(lw, session.task_id, lambda history: Plan(done=True), lambda name, args: 1, pay)
    assert not ToolCall.objects.filter(task_id=session.task_id).exists()
    assert not Operation.objects.filter(operation_key="pay-INV-1").exists()
    task = session.get()
    assert task["state"] == terms.RUNNING and task["usage"]["model_calls"] == 0
