"""LangChain v1: one middleware guards an agent's model calls and tool calls.

    from loopwarden_client.langchain import LoopwardenMiddleware
    from loopwarden_client.guard import write

    agent = create_agent(model, tools, middleware=[
        LoopwardenMiddleware(lw.session(task_id), tools={"pay": write(key="pay-{invoice}")}),
    ])

Put it first in `middleware`: the first is the outermost, so a retry middleware placed after it
(`ToolRetryMiddleware`, `ModelRetryMiddleware`) retries inside one guarded call and never sees,
let alone retries, a STOP. Placed before it, a retry middleware would retry the TaskStopped.
A write tool runs at most once per guarded call all the same: a retry inside one is refused
before the tool runs (never a blind retry of a side effect), and the write ends UNKNOWN.

A model STOP (gate or usage report) ends the run cleanly: the model is not called and the
last message is an `AIMessage` without tool calls whose `response_metadata["loopwarden"]`
holds the stop report. A tool STOP raises `TaskStopped` out of `invoke`/`ainvoke`/`stream`.
A tool's exception is reported as NO_RESULT. An error `ToolMessage` the framework made of one
because the user asked it to (`handle_tool_error`, a retry middleware's last answer) goes to
the model as LangChain intends; a read's is reported RETRYABLE (it counts against the retry
budget), a write's NO_RESULT (its operation is UNKNOWN: it may have acted first).

When the run ends with the model's final answer, `after_agent` finishes the task
(`Guard.finish`), unless `keep_open=True`. The declared tools are checked at the first model
call against the agent's tools, by the names the model sees. Needs the `langchain` extra.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Unpack

from loopwarden_client.guard import needs_extra

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain.agents.middleware.types import ExtendedModelResponse
    from langchain_core.messages import AIMessage, ToolMessage
    from pydantic import ValidationError
except ImportError as exc:  # the extra is missing: say which one
    raise needs_extra(__name__, "langchain") from exc

from loopwarden_client.client import AsyncTaskSession, TaskSession
from loopwarden_client.guard import (
    STOPPED,
    Adapter,
    Guard,
    GuardOptions,
    InvalidArguments,
    handed_back,
)
from loopwarden_client.types import (
    EXECUTE,
    INVALID,
    NO_RESULT,
    REUSE,
    WRITE,
    ToolOutcome,
    ToolReport,
    jsonable,
)

__all__ = ["LoopwardenMiddleware"]


class LoopwardenMiddleware(AgentMiddleware, Adapter):
    """Asks Loopwarden before every model call and every tool call of a LangChain agent.

    `session`: a `TaskSession` (sync and async runs) or an `AsyncTaskSession` (async runs).
    `options`: see `loopwarden_client.guard.GuardOptions`. `report` holds the stop report once
    the task has ended.
    """

    def __init__(
        self, session: TaskSession | AsyncTaskSession, **options: Unpack[GuardOptions]
    ) -> None:
        super().__init__()
        self.guard = Guard(session, **options)
        self._tools_checked = False

    # -- the run's end

    def after_agent(self, state: Any, runtime: Any) -> None:
        self.guard.run(self.guard.finish(_final_answer(state)))

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        await self.guard.arun(self.guard.finish(_final_answer(state)))

    # -- model calls

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> Any:
        return self._answered(self.guard.run(self._turn(request, handler)))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        return self._answered(await self.guard.arun(self._turn(request, handler)))

    def _turn(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]):
        if not self._tools_checked:  # the middleware first sees the agent's tools here
            self.guard.check_tools(_tool_name(tool) for tool in request.tools)
            self._tools_checked = True
        return self.guard.model_turn(_model_name(request), partial(handler, request), self._usage)

    def _answered(self, response: Any) -> Any:
        return self._stopped() if response is STOPPED else response

    def _usage(self, model_call: int, response: Any):
        message = _ai_message(response)
        usage = getattr(message, "usage_metadata", None) or {}
        calls = [{"name": c["name"], "args": c.get("args") or {}}
                 for c in (getattr(message, "tool_calls", None) or [])]  # fmt: skip
        text = message.text if isinstance(message, AIMessage) else None
        return self.guard.usage(
            model_call,
            prompt_tokens=usage.get("input_tokens"),
            completion_tokens=usage.get("output_tokens"),
            tool_calls=calls,
            output_text=text or None,
        )

    def _stopped(self) -> AIMessage:
        # No tool calls: the agent loop ends here, with the report for whoever reads the state.
        return AIMessage(
            content=self.guard.stop_message(),
            name="loopwarden",
            response_metadata={"loopwarden": self.guard.report},
        )

    # -- tool calls

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if (refused := _refused(request)) is not None:
            return refused
        produced: list[Any] = []

        def execute(args: Mapping[str, Any]) -> ToolReport:
            produced.append(handler(self._once(request)))
            return _tool_report(produced[-1], self._effect(request))

        outcome = self.guard.run(self._tool(request, execute))
        return produced[-1] if outcome.decision == EXECUTE else _answer(request, outcome)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        if (refused := _refused(request)) is not None:
            return refused
        produced: list[Any] = []

        async def execute(args: Mapping[str, Any]) -> ToolReport:
            produced.append(await handler(self._once(request)))
            return _tool_report(produced[-1], self._effect(request))

        outcome = await self.guard.arun(self._tool(request, execute))
        return produced[-1] if outcome.decision == EXECUTE else _answer(request, outcome)

    def _effect(self, request: Any) -> str:
        return self.guard.spec(request.tool_call["name"]).effect

    def _once(self, request: Any) -> Any:
        """The request a write is executed with: its tool runs at most once per EXECUTE.

        A retry middleware after the guard (`ToolRetryMiddleware`) calls the handler again
        inside one guarded call; for a write that timed out this would be a blind retry of a
        side effect that may have committed. The second try is refused before the tool runs,
        so the retry ends in an error and the write is reported NO_RESULT (UNKNOWN)."""
        tool = request.tool
        if tool is None or self.guard.spec(request.tool_call["name"]).effect != WRITE:
            return request
        ran: list[bool] = []

        def first_time() -> None:
            if ran:
                raise RuntimeError(
                    f"Loopwarden: write {tool.name!r} already ran once under this tool call "
                    "and is never retried blind; its commit state is for a human to reconcile"
                )
            ran.append(True)

        def invoke(*args: Any, **kwargs: Any) -> Any:
            first_time()
            return tool.invoke(*args, **kwargs)

        async def ainvoke(*args: Any, **kwargs: Any) -> Any:
            first_time()
            return await tool.ainvoke(*args, **kwargs)

        once = copy.copy(tool)
        object.__setattr__(once, "invoke", invoke)  # a pydantic model: set past its fields
        object.__setattr__(once, "ainvoke", ainvoke)
        return request.override(tool=once)

    def _tool(self, request: Any, execute: Callable[[Mapping[str, Any]], Any]):
        call = request.tool_call
        args = call.get("args") or {}
        return self.guard.tool(call["name"], args, execute, call_id=call.get("id"))


def _refused(request: Any) -> ToolMessage | None:
    """The model's arguments checked against the tool's schema before anything is asked: the
    tool node would refuse them before the tool runs, and its error message would be reported
    as NO_RESULT (a read FAILED, a write UNKNOWN) for a call that never ran. A schema violation
    is the model's mistake, answered to it as the tool's message, like a key it cannot derive."""
    schema = getattr(request.tool, "tool_call_schema", None)
    if not (isinstance(schema, type) and hasattr(schema, "model_validate")):
        return None
    call = request.tool_call
    try:
        schema.model_validate(call.get("args") or {})
    except ValidationError as error:
        invalid = InvalidArguments("its arguments from the tool's schema", error)
        return _answer(request, ToolOutcome(invalid.tool_message(call["name"]), INVALID))
    return None


def _tool_name(tool: Any) -> str:
    """A tool as the model sees it: a `BaseTool`'s name, or a provider tool's dict."""
    return str(tool.get("name", "")) if isinstance(tool, dict) else str(tool.name)


def _final_answer(state: Any) -> str | None:
    """The text of the run's last AI message: the answer the task is finished with."""
    messages = state.get("messages", []) if isinstance(state, Mapping) else []
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    return (last.text or None) if last is not None else None


def _model_name(request: ModelRequest) -> str | None:
    for attribute in ("model_name", "model"):
        name = getattr(request.model, attribute, None)
        if isinstance(name, str) and name:
            return name
    return None


def _ai_message(response: Any) -> Any:
    if isinstance(response, ExtendedModelResponse):
        response = response.model_response
    if isinstance(response, ModelResponse):
        return next((m for m in response.result if isinstance(m, AIMessage)), None)
    return response


def _tool_report(output: Any, effect: str) -> ToolReport:
    """A tool node's answer as a result. An error message is never a success: the framework
    made it of the tool's error because the user asked it to (`handle_tool_error`, a retry
    middleware's last answer), and hands it to the model; a read's counts as a retry
    (`handed_back`), a write's is NO_RESULT (it may have acted before it failed)."""
    if isinstance(output, ToolMessage):
        if output.status == "error":
            if effect == WRITE:
                return ToolReport(kind=NO_RESULT, error=str(output.content)[:2000])
            return handed_back(str(output.content))
        return ToolReport(data=jsonable(output.content))
    return ToolReport(data=jsonable(output))  # a Command: the update it makes


def _answer(request: Any, outcome: Any) -> ToolMessage:
    """REUSE, BLOCK, an exhausted WAIT or INVALID arguments, handed to the model as the tool's
    answer."""
    call = request.tool_call
    return ToolMessage(
        content=json.dumps(outcome.message, ensure_ascii=False, default=str),
        tool_call_id=call.get("id") or "",
        name=call["name"],
        status="success" if outcome.decision == REUSE else "error",
    )
