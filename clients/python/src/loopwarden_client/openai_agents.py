"""OpenAI Agents SDK: guard an `Agent`'s model and its function tools in one call.

    from loopwarden_client.openai_agents import guard_agent
    from loopwarden_client.guard import write

    agent = guard_agent(agent, lw.session(task_id), tools={"pay": write(key="pay-{invoice}")})
    result = await Runner.run(agent, "pay invoice 42")

Hooks cannot replace a tool's output, so the agent is cloned with a model wrapper (every model
call, retries included, passes the gate; a STOP answers a final assistant message carrying the
report instead of calling the model) and a wrapper around each function tool's
`on_invoke_tool` (EXECUTE runs it; REUSE and BLOCK answer the stored result or the nudge;
WAIT is slept out). The wrapped tools let their exceptions through (no failure error function)
so that an exception is reported as NO_RESULT, never as the SDK's "An error occurred" success.
A tool STOP raises `AgentTaskStopped`, a `TaskStopped` that is also an `AgentsException`, so it
leaves `Runner.run` unwrapped. `Runner.run_streamed` is guarded the same way. Tools other than
function tools (hosted tools) cannot be guarded and are refused. Needs the `openai-agents`
extra.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from functools import partial
from typing import Any, Unpack

from loopwarden_client.guard import needs_extra

try:
    from agents.exceptions import AgentsException
    from agents.models.multi_provider import MultiProvider
    from agents.tool import set_function_tool_failure_error_function
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from agents import Agent, FunctionTool, Model, ModelResponse, Usage
except ImportError as exc:  # the extra is missing: say which one
    raise needs_extra(__name__, "openai-agents") from exc

from loopwarden_client.client import AsyncTaskSession, TaskSession
from loopwarden_client.errors import TaskStopped
from loopwarden_client.guard import STOPPED, Guard, GuardOptions, jsonable, provider_counts
from loopwarden_client.types import EXECUTE, ToolReport

__all__ = ["AgentTaskStopped", "GuardedModel", "guard_agent"]


class AgentTaskStopped(TaskStopped, AgentsException):
    """A tool STOP: a `TaskStopped` the SDK lets out of `Runner.run` as it is."""


def guard_agent(
    agent: Agent[Any], session: TaskSession | AsyncTaskSession, **options: Unpack[GuardOptions]
) -> Agent[Any]:
    """A clone of `agent` whose model calls and function tools ask Loopwarden first.

    `session`: a `TaskSession` (its requests run in a worker thread; fits `Runner.run_sync`)
    or an `AsyncTaskSession`. `options`: see `loopwarden_client.guard.GuardOptions`; a declared
    tool the agent does not have is refused. The clone's `loopwarden` attribute is the `Guard`
    (its `report` holds the stop report once the task ended).
    """
    guard = Guard(session, **options)
    names = set()
    guarded_tools = []
    for tool in agent.tools:
        if not isinstance(tool, FunctionTool):
            raise TypeError(
                f"{type(tool).__name__} runs outside this process and cannot be guarded; "
                "give the agent function tools only"
            )
        names.add(tool.name)
        guarded_tools.append(_guard_tool(guard, tool))
    unknown = set(guard.tools) - names
    if unknown:
        raise ValueError(f"declared tools the agent does not have: {sorted(unknown)}")
    model = agent.model
    if not isinstance(model, Model):
        model = MultiProvider().get_model(model)
    clone = agent.clone(model=GuardedModel(model, guard), tools=guarded_tools)
    clone.loopwarden = guard  # type: ignore[attr-defined]
    return clone


def _guard_tool(guard: Guard, tool: FunctionTool) -> FunctionTool:
    guarded = copy.copy(tool)  # rebinds the SDK's invoker to the copy
    set_function_tool_failure_error_function(guarded, None)  # exceptions reach the guard
    invoke = guarded.on_invoke_tool

    async def on_invoke_tool(context: Any, arguments: str) -> Any:
        produced: list[Any] = []

        async def execute(args: Mapping[str, Any]) -> ToolReport:
            produced.append(await invoke(context, arguments))
            return ToolReport(data=jsonable(produced[-1]))

        try:
            args = json.loads(arguments) if arguments else {}
        except ValueError:
            args = {"arguments": arguments}  # the tool itself will refuse it: NO_RESULT
        call_id = getattr(context, "tool_call_id", None)
        try:
            outcome = await guard.arun(guard.tool(tool.name, args, execute, call_id=call_id))
        except TaskStopped as stop:
            raise AgentTaskStopped(stop.report, task_id=stop.task_id) from stop
        if outcome.decision == EXECUTE:
            return produced[-1]
        return json.dumps(outcome.message, ensure_ascii=False, default=str)

    guarded.on_invoke_tool = on_invoke_tool
    return guarded


class GuardedModel(Model):
    """A model whose every call passes Loopwarden's gate and reports its usage."""

    def __init__(self, model: Model, guard: Guard) -> None:
        self.model = model
        self.guard = guard

    def _name(self) -> str | None:
        name = getattr(self.model, "model", None)
        return name if isinstance(name, str) else None

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        call_model = partial(self.model.get_response, *args, **kwargs)
        response = await self.guard.arun(self.guard.model_turn(self._name(), call_model, self._of))
        return self._stopped() if response is STOPPED else response

    def _of(self, model_call: int, response: ModelResponse):
        return self._usage(model_call, response.usage, response.output)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        model_call = await self.guard.arun(self.guard.gate(self._name()))
        if model_call is None:
            yield _completed(self._stop_message())
            return
        async for event in self.model.stream_response(*args, **kwargs):
            if isinstance(event, ResponseCompletedEvent):
                response = event.response
                usage = response.usage
                if not await self.guard.arun(self._usage(model_call, usage, response.output)):
                    response.output = [self._stop_message()]
            yield event

    async def close(self) -> None:
        await self.model.close()

    def _usage(self, model_call: int, usage: Any, output: list[Any]):
        prompt, completion = provider_counts(
            getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None)
        )
        calls = [{"name": item.name, "args": _arguments(item.arguments)}
                 for item in output if isinstance(item, ResponseFunctionToolCall)]  # fmt: skip
        texts = [part.text for item in output if isinstance(item, ResponseOutputMessage)
                 for part in item.content if isinstance(part, ResponseOutputText)]  # fmt: skip
        return self.guard.usage(
            model_call,
            prompt_tokens=prompt,
            completion_tokens=completion,
            tool_calls=calls,
            output_text="\n".join(texts) or None,
        )

    def _stop_message(self) -> ResponseOutputMessage:
        text = self.guard.stop_message() + "\n" + json.dumps(self.guard.report, sort_keys=True)
        return ResponseOutputMessage(
            id=f"msg_loopwarden_{uuid.uuid4().hex[:12]}",
            content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
            role="assistant",
            status="completed",
            type="message",
        )

    def _stopped(self) -> ModelResponse:
        return ModelResponse(output=[self._stop_message()], usage=Usage(), response_id=None)


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}


def _completed(message: ResponseOutputMessage) -> ResponseCompletedEvent:
    response = Response(
        id=f"resp_loopwarden_{uuid.uuid4().hex[:12]}",
        created_at=time.time(),
        model="loopwarden",
        object="response",
        output=[message],
        parallel_tool_calls=False,
        tool_choice="none",
        tools=[],
    )
    return ResponseCompletedEvent(response=response, sequence_number=0, type="response.completed")
