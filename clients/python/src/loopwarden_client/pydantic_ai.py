"""pydantic-ai: one capability guards an agent's model requests and tool executions.

    from loopwarden_client.pydantic_ai import LoopwardenCapability
    from loopwarden_client.guard import write

    agent = Agent(model, tools=[...], capabilities=[
        LoopwardenCapability(lw.session(task_id), tools={"pay": write(key="pay-{invoice}")}),
    ])

`wrap_model_request` gates every model request: a STOP answers a final text response
carrying the report instead of calling the model, so the run ends cleanly with it as output
(for agents whose output may be text; with structured output a STOP raises `TaskStopped`).
`wrap_tool_execute` asks before every tool execution: EXECUTE runs it (an exception is
NO_RESULT); REUSE and BLOCK hand the stored result or the nudge to the model as the tool's
return value; WAIT is slept out; a STOP raises `TaskStopped` out of `run`/`run_sync`. Put it
first in `capabilities` so that no other capability's retry wraps it.

An output function (`output_type=fn`, `ToolOutput(fn)`, `TextOutput(fn)`) runs the model's
arguments as a tool does, so its final call is asked for as a tool named after the function
(declare a write in `tools` like any other): REUSE answers the stored result as the output,
BLOCK and an exhausted WAIT go back to the model as a retry prompt.

`ModelRetry` raised by a read tool (or an output function) is pydantic-ai's way to ask the
model for better arguments: it is reported RETRYABLE (it counts against the retry budget) and
goes back to the model as pydantic-ai intends. Raised by a write, it is NO_RESULT: the tool
ran, nothing says it had not acted yet, so its operation is UNKNOWN and a human reconciles
it; check a write's arguments in its schema (validated before the tool runs) instead.

When the run ends with its output, `after_run` finishes the task (`Guard.finish`), unless
`keep_open=True`. The declared tools are checked at the first model request against the
agent's tools (by the names the model sees) and output functions (by their names). Needs the
`pydantic-ai` extra.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Unpack

from loopwarden_client.guard import needs_extra

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ModelRetry, ToolRetryError
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
except ImportError as exc:  # the extra is missing: say which one
    raise needs_extra(__name__, "pydantic-ai") from exc

from loopwarden_client.client import AsyncTaskSession, TaskSession
from loopwarden_client.errors import TaskStopped
from loopwarden_client.guard import (
    STOPPED,
    Adapter,
    Guard,
    GuardOptions,
    answer_text,
    handed_back,
)
from loopwarden_client.types import EXECUTE, REUSE, WRITE, ToolOutcome, ToolReport, jsonable

__all__ = ["LoopwardenCapability"]


class LoopwardenCapability(AbstractCapability[Any], Adapter):
    """Asks Loopwarden before every model request and every tool execution of an agent.

    `session`: a `TaskSession` (its requests run in a worker thread; fits `run_sync`) or an
    `AsyncTaskSession`. `options`: see `loopwarden_client.guard.GuardOptions`. `report` holds
    the stop report once the task ended.
    """

    def __init__(
        self, session: TaskSession | AsyncTaskSession, **options: Unpack[GuardOptions]
    ) -> None:
        self.guard = Guard(session, **options)
        self._tools_checked = False

    async def prepare_tools(self, ctx: Any, tool_defs: list[Any]) -> list[Any]:
        if not self._tools_checked:  # the capability first sees the agent's tools here
            agent = ctx.agent
            # This step's tools, the agent's function tools (one its `prepare` hides from
            # this step still counts) and its output functions.
            names = [tool_def.name for tool_def in tool_defs]
            names += [name for toolset in getattr(agent, "toolsets", ())
                      for name in (getattr(toolset, "tools", None) or {})]  # fmt: skip
            names += _output_functions(getattr(agent, "output_type", None))
            self.guard.check_tools(names)
            self._tools_checked = True
        return tool_defs

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        """The run ended with its output: finish the task (see `Guard.finish`)."""
        await self.guard.arun(self.guard.finish(answer_text(result.output)))
        return result

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live session: not built from a spec

    async def wrap_model_request(self, ctx: Any, *, request_context: Any, handler: Any) -> Any:
        name = getattr(request_context.model, "model_name", None)
        turn = self.guard.model_turn(
            name if isinstance(name, str) else None, partial(handler, request_context), self._usage
        )
        response = await self.guard.arun(turn)
        if response is not STOPPED:
            return response
        if not _takes_text(request_context.model_request_parameters):
            # A stop text is no valid structured output: pydantic-ai would send it back to be
            # retried and end with UnexpectedModelBehavior. End the run with the report.
            raise TaskStopped(self.guard.report, task_id=self.guard.task_id)
        return self._stopped()

    def _usage(self, model_call: int, response: ModelResponse):
        calls = [{"name": part.tool_name, "args": part.args_as_dict()}
                 for part in response.parts if isinstance(part, ToolCallPart)]  # fmt: skip
        text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
        # A fallback (ModelFallback, FallbackModel) keeps the usage of the billed responses it
        # moved on from on `failed_attempts`, not in the answer's own `usage`.
        usages = [response.usage] + [attempt.usage for attempt in response.failed_attempts or ()
                                     if attempt.usage is not None]  # fmt: skip
        return self.guard.usage(
            model_call,
            prompt_tokens=sum(usage.input_tokens or 0 for usage in usages),
            completion_tokens=sum(usage.output_tokens or 0 for usage in usages),
            tool_calls=calls,
            output_text=text or None,
        )

    def _stopped(self) -> ModelResponse:
        text = self.guard.stop_message() + "\n" + json.dumps(self.guard.report, sort_keys=True)
        return ModelResponse(parts=[TextPart(content=text)], model_name="loopwarden")

    async def wrap_tool_execute(
        self, ctx: Any, *, call: ToolCallPart, tool_def: Any, args: Any, handler: Any
    ) -> Any:
        ran, outcome = await self._guarded(
            call.tool_name, call.args_as_dict(), partial(handler, args), call.tool_call_id
        )
        return ran if outcome.decision == EXECUTE else outcome.message

    async def wrap_output_process(
        self, ctx: Any, *, output_context: Any, output: Any, handler: Any
    ) -> Any:
        if not output_context.has_function or getattr(ctx, "partial_output", False):
            return await handler(output)
        call = output_context.tool_call
        name = output_context.function_name or (call.tool_name if call else "output")
        args = call.args_as_dict() if call is not None else {"output": jsonable(output)}
        call_id = call.tool_call_id if call is not None else None
        ran, outcome = await self._guarded(name, args, partial(handler, output), call_id)
        if outcome.decision == EXECUTE:
            return ran
        if outcome.decision == REUSE:
            return outcome.message.get("data")
        raise ModelRetry(json.dumps(outcome.message, ensure_ascii=False, default=str))

    async def _guarded(
        self,
        name: str,
        args: Mapping[str, Any],
        run: Callable[[], Awaitable[Any]],
        call_id: str | None,
    ) -> tuple[Any, ToolOutcome]:
        """`run()` under the guard as the tool call `name(args)`: what it returned (on
        EXECUTE; else None) and the outcome."""
        produced: list[Any] = [None]
        retry: list[Exception] = []

        async def execute(_: Mapping[str, Any]) -> ToolReport:
            try:
                produced[0] = await run()
            except (ModelRetry, ToolRetryError) as asked:  # the latter: a ModelRetry, wrapped
                if self.guard.spec(name).effect == WRITE:
                    raise  # NO_RESULT: the write may have acted before it asked
                retry.append(asked)
                return handed_back(str(getattr(asked, "message", None) or asked))
            return ToolReport(data=jsonable(produced[0]))

        outcome = await self.guard.arun(self.guard.tool(name, args, execute, call_id=call_id))
        if retry and outcome.decision == EXECUTE:
            raise retry[0]  # back to the model, as pydantic-ai intends
        return produced[0], outcome


def _output_functions(output: Any) -> list[str]:
    """The names of the output functions in an agent's `output_type` (a function, a list of
    outputs, or `ToolOutput`/`TextOutput`/`NativeOutput` around them): declared by these
    names, as they are guarded (see the module's docstring)."""
    if isinstance(output, list | tuple | set):
        return [name for item in output for name in _output_functions(item)]
    if inspect.isfunction(output) or inspect.ismethod(output):
        return [output.__name__]
    if isinstance(output, type) or output is None:
        return []
    for attribute in ("output", "outputs"):
        if (inner := getattr(output, attribute, None)) is not None:
            return _output_functions(inner)
    return []


def _takes_text(parameters: Any) -> bool:
    """Whether the agent's output may be plain text: `str`, or a union with `str` (tool output
    that also accepts text). Native, prompted and plain tool output need the schema."""
    mode = getattr(parameters, "output_mode", "text")
    return mode == "text" or (mode == "tool" and bool(getattr(parameters, "allow_text_output", 0)))
