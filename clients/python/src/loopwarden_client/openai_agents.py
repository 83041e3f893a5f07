"""OpenAI Agents SDK: guard an `Agent`, and the agents it hands off to, in one call.

    from loopwarden_client.openai_agents import guard_agent, guard_run_config
    from loopwarden_client.guard import write

    agent = guard_agent(agent, lw.session(task_id), tools={"pay": write(key="pay-{invoice}")})
    result = await Runner.run(agent, "pay invoice 42")
    # with a RunConfig: run_config=guard_run_config(RunConfig(...), agent)

Hooks cannot replace a tool's output, so the agent is cloned with a model wrapper (every model
call, retries included, passes the gate; a STOP answers a final assistant message carrying the
report instead of calling the model) and a wrapper around each function tool's
`on_invoke_tool` (EXECUTE runs it; REUSE and BLOCK answer the stored result or the nudge;
WAIT is slept out). The wrapped tools let their exceptions through (no failure error function)
so that an exception is reported as NO_RESULT, never as the SDK's "An error occurred" success.
A tool STOP raises `AgentTaskStopped`, a `TaskStopped` that is also an `AgentsException`, so it
leaves `Runner.run` unwrapped. `Runner.run_streamed` is guarded the same way.

Every agent reachable through `handoffs` (an `Agent`, or a `handoff(agent)`) is cloned the same
way, once, under the same session. What cannot be guarded is refused when the agent is
wrapped: hosted tools and MCP servers (they run outside this process), a `Handoff` whose
target agent cannot be reached, and an `Agent.as_tool()` tool whose agent is not guarded (its
nested run is out of reach: make it from a clone, `guard_agent(inner, session).as_tool(...)`).

Models are resolved the way the SDK's runner resolves them, but at the first call, not when the
agent is wrapped: a model name (or None, the default model) goes through the model provider of
the run config given to `guard_run_config`, or the SDK's default provider. A `RunConfig`
replaces the agents' models with its own `model` when it has one, out of the clones' reach:
run with `guard_run_config(run_config, agent)`. A run whose model call did not pass the gate
(an unguarded `RunConfig.model`) is ended after that call with `UnguardedModelCall`.

When the run ends with an agent's final output, the clone's `on_end` hook finishes the task
(`Guard.finish`), unless `keep_open=True`; a guarded agent run as another's tool
(`as_tool`) hands its output back to that agent instead, whose own end finishes the task.
Needs the `openai-agents` extra.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
import uuid
import weakref
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

    from agents import (
        Agent,
        AgentHooks,
        FunctionTool,
        Handoff,
        Model,
        ModelProvider,
        ModelResponse,
        RunConfig,
        Usage,
    )
except ImportError as exc:  # the extra is missing: say which one
    raise needs_extra(__name__, "openai-agents") from exc

from loopwarden_client.client import AsyncTaskSession, TaskSession
from loopwarden_client.errors import TaskStopped
from loopwarden_client.guard import STOPPED, Guard, GuardOptions, answer_text
from loopwarden_client.types import EXECUTE, ToolReport, jsonable

__all__ = [
    "AgentTaskStopped",
    "GuardedModel",
    "UnguardedModelCall",
    "guard_agent",
    "guard_run_config",
]


class AgentTaskStopped(TaskStopped, AgentsException):
    """A tool STOP: a `TaskStopped` the SDK lets out of `Runner.run` as it is."""


class UnguardedModelCall(AgentsException):
    """A model call of a guarded agent's run did not pass the gate; the run ends here."""


def guard_agent(
    agent: Agent[Any], session: TaskSession | AsyncTaskSession, **options: Unpack[GuardOptions]
) -> Agent[Any]:
    """A clone of `agent`, and of every agent it hands off to, whose model calls and function
    tools ask Loopwarden first.

    `session`: a `TaskSession` (its requests run in a worker thread; fits `Runner.run_sync`)
    or an `AsyncTaskSession`. `options`: see `loopwarden_client.guard.GuardOptions`; a declared
    tool that none of the agents has is refused. The clone's `loopwarden` attribute is the
    `Guard` (its `report` holds the stop report once the task ended). What cannot be guarded
    is refused here (see the module's docstring).
    """
    graph = _Graph(Guard(session, **options))
    clone = graph.clone(agent)
    graph.guard.check_tools(graph.tool_names)
    return clone


def guard_run_config(run_config: RunConfig, agent: Agent[Any]) -> RunConfig:
    """The run config to run a guarded agent (`guard_agent`'s clone) with.

    Its `model`, if it has one, passes the gate too (a name is resolved through its
    `model_provider` at the first call), and from now on the agents' model names resolve
    through its `model_provider`, as the SDK's runner would resolve them.
    """
    graph = getattr(agent, "_loopwarden_graph", None)
    if not isinstance(graph, _Graph):
        raise TypeError("guard the agent first: guard_run_config(run_config, guard_agent(...))")
    graph.provider = run_config.model_provider
    model = run_config.model
    if model is not None and not isinstance(model, GuardedModel):
        model = GuardedModel(model, graph.guard, graph)
    return dataclasses.replace(run_config, model=model)


class _Graph:
    """What the clones of one `guard_agent` call share: the guard, the clone of each agent
    (so a cycle of handoffs is cloned once), the provider that resolves model names, and the
    count of guarded model calls the clones' hooks check."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.clones: dict[int, Agent[Any]] = {}
        self.tool_names: set[str] = set()
        self.provider: ModelProvider | None = None  # None: the SDK's default, made when needed
        self.model_calls = 0
        self.llm_started: dict[int, int] = {}  # per run context: model_calls at on_llm_start
        # Run as another guarded agent's tool (as_tool): its answer goes back to that agent,
        # whose own run's end finishes the task.
        self.nested = False

    def resolve(self, name: str | None) -> tuple[ModelProvider, Model]:
        if self.provider is None:
            self.provider = MultiProvider()
        return self.provider, self.provider.get_model(name)

    def clone(self, agent: Agent[Any]) -> Agent[Any]:
        if id(agent) in self.clones:
            return self.clones[id(agent)]
        if agent.mcp_servers:
            raise TypeError(
                f"agent {agent.name!r}: MCP servers' tools run outside this process and "
                "cannot be guarded"
            )
        tools = []
        for tool in agent.tools:
            if not isinstance(tool, FunctionTool):
                raise TypeError(
                    f"{type(tool).__name__} runs outside this process and cannot be guarded; "
                    "give the agent function tools only"
                )
            _admit_agent_tool(tool)
            self.tool_names.add(tool.name)
            tools.append(_guard_tool(self.guard, tool))
        clone = agent.clone(
            model=GuardedModel(agent.model, self.guard, self),
            tools=tools,
            handoffs=[],
            hooks=_CheckedHooks(agent.hooks, self),
        )
        clone.loopwarden = self.guard  # type: ignore[attr-defined]
        clone._loopwarden_graph = self  # type: ignore[attr-defined]
        self.clones[id(agent)] = clone  # before the handoffs: they may lead back here
        clone.handoffs = [self._handoff(item) for item in agent.handoffs]
        return clone

    def _handoff(self, item: Agent[Any] | Handoff[Any, Any]) -> Agent[Any] | Handoff[Any, Any]:
        if isinstance(item, Agent):
            return self.clone(item)
        # `handoff(agent)` keeps its target in `_agent_ref`, the link the SDK's runner reads too.
        ref = getattr(item, "_agent_ref", None)
        target = ref() if ref is not None else None
        if not isinstance(target, Agent):
            raise ValueError(
                f"handoff {item.tool_name!r}: its target agent cannot be reached, so its model "
                "and tools cannot be guarded; hand off to an Agent or to handoff(agent)"
            )
        clone, invoke = self.clone(target), item.on_invoke_handoff

        async def on_invoke_handoff(context: Any, arguments: str) -> Agent[Any]:
            handed = await invoke(context, arguments)
            if handed is not target:
                raise UnguardedModelCall(
                    f"handoff {item.tool_name!r} handed off to {handed.name!r}, an agent "
                    "that was not guarded"
                )
            return clone

        guarded = dataclasses.replace(item, on_invoke_handoff=on_invoke_handoff)
        guarded._agent_ref = weakref.ref(clone)  # the closure above keeps the clone alive
        return guarded


class _CheckedHooks(AgentHooks[Any]):
    """The agent's own hooks, plus the check that each model call passed the gate: the SDK
    resolves `RunConfig.model` over the agent's, where no wrapper can reach it."""

    def __init__(self, hooks: Any, graph: _Graph) -> None:
        self.hooks = hooks if hooks is not None else AgentHooks()
        self.graph = graph

    async def on_llm_start(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        self.graph.llm_started[id(context)] = self.graph.model_calls
        await self.hooks.on_llm_start(context, agent, *args, **kwargs)

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        started = self.graph.llm_started.pop(id(context), None)
        if started is not None and self.graph.model_calls == started:
            raise UnguardedModelCall(
                f"a model call of agent {agent.name!r} did not pass Loopwarden's gate: the "
                "run's RunConfig.model replaces the guarded agent's model; run with "
                "run_config=guard_run_config(run_config, agent)"
            )
        await self.hooks.on_llm_end(context, agent, response)

    async def on_start(self, *args: Any, **kwargs: Any) -> None:
        await self.hooks.on_start(*args, **kwargs)

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        """The run ended with this agent's final output: finish the task (see `Guard.finish`)."""
        if not self.graph.nested:
            guard = self.graph.guard
            await guard.arun(guard.finish(answer_text(output)))
        await self.hooks.on_end(context, agent, output)

    async def on_handoff(self, *args: Any, **kwargs: Any) -> None:
        await self.hooks.on_handoff(*args, **kwargs)

    async def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
        await self.hooks.on_tool_start(*args, **kwargs)

    async def on_tool_end(self, *args: Any, **kwargs: Any) -> None:
        await self.hooks.on_tool_end(*args, **kwargs)


def _admit_agent_tool(tool: FunctionTool) -> None:
    """An `Agent.as_tool()` tool runs its agent in a nested run, out of the clones' reach: its
    agent must be a guarded clone itself, or its model calls and tools would not pass the gate."""
    inner = getattr(tool, "_agent_instance", None)  # set by as_tool (openai-agents 0.24)
    if not getattr(tool, "_is_agent_tool", False):
        return
    graph = getattr(inner, "_loopwarden_graph", None)
    if isinstance(graph, _Graph):
        graph.nested = True  # its run's end is not the task's
    else:
        raise TypeError(
            f"tool {tool.name!r} runs agent {getattr(inner, 'name', None)!r} (Agent.as_tool) "
            "in a nested run whose model calls and tools would not pass the gate; guard that "
            "agent first: guard_agent(agent, session).as_tool(...)"
        )


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
    """A model whose every call passes Loopwarden's gate and reports its usage.

    `model` is a `Model`, or a name (None: the default model) resolved at the first call
    through the run config's provider (see `guard_run_config`) or the SDK's default provider.
    """

    def __init__(
        self, model: Model | str | None, guard: Guard, graph: _Graph | None = None
    ) -> None:
        self.source = model
        self.guard = guard
        self.graph = graph if graph is not None else _Graph(guard)
        self._resolved: tuple[ModelProvider | None, Model] | None = None

    @property
    def model(self) -> Model:
        """The model called, resolved now if it is given by name."""
        if isinstance(self.source, Model):
            return self.source
        if self._resolved is None or self._resolved[0] is not self.graph.provider:
            self._resolved = self.graph.resolve(self.source)
        return self._resolved[1]

    def _name(self) -> str | None:
        if isinstance(self.source, str):
            return self.source
        name = getattr(self.model, "model", None)
        return name if isinstance(name, str) else None

    def _counted(self) -> None:
        self.graph.model_calls += 1

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self._counted()
        call_model = partial(self.model.get_response, *args, **kwargs)
        response = await self.guard.arun(self.guard.model_turn(self._name(), call_model, self._of))
        return self._stopped() if response is STOPPED else response

    def _of(self, model_call: int, response: ModelResponse):
        return self._usage(model_call, response.usage, response.output)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        self._counted()
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
        if isinstance(self.source, Model) or self._resolved is not None:
            await self.model.close()

    def _usage(self, model_call: int, usage: Any, output: list[Any]):
        calls = [{"name": item.name, "args": _arguments(item.arguments)}
                 for item in output if isinstance(item, ResponseFunctionToolCall)]  # fmt: skip
        texts = [part.text for item in output if isinstance(item, ResponseOutputMessage)
                 for part in item.content if isinstance(part, ResponseOutputText)]  # fmt: skip
        return self.guard.usage(
            model_call,
            prompt_tokens=getattr(usage, "input_tokens", None),
            completion_tokens=getattr(usage, "output_tokens", None),
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
