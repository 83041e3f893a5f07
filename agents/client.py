"""Loopwarden's thin client: ask before every paid model call and every tool execution.

Depends on httpx only; importing it needs no Django settings, so any agent process can use it.

    client = Client("http://127.0.0.1:8000/api/v1/", token)
    task = client.create_task("Export every invoice")
    session = client.session(task["id"])
    with session.model_call(model="gpt-4o", est_prompt_tokens=2000) as call:
        reply = llm(...)                       # the paid call, only after ALLOW
        call.usage(reply.prompt_tokens, reply.completion_tokens, tool_calls=reply.tool_calls)
    message = session.tool("fetch_page", {"page": 1}, fetch_page, inspect=verify_page)

or let `run(client, task_id, plan, execute, inspect)` drive the whole loop. Every guard STOP
raises `TaskStopped` (sticky: asking again only repeats it); refused requests raise
`LoopwardenError`; network failures surface as httpx exceptions.

Each endpoint is written once, in `_Api`. `Client` sends a call at once, `AsyncClient` returns
a coroutine, and `_CALLS` hands the call back unsent, which lets the tool, usage and loop logic
be written once as generators (`_tool_flow`, `_usage_flow`, `_run_flow`) run by a sync and an
async driver. The shared internals live in `agents._client_flow`; this module is the public
face and the only one to import from.
"""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

import httpx

# Everything `agents.client` offered before its internals moved stays importable from here.
from agents._client_flow import (  # noqa: F401
    _CALLS,
    BLOCK,
    DEFAULT_WAIT_MS,
    EXECUTE,
    JSON,
    NO_RESULT,
    PENDING,
    RETRYABLE,
    REUSE,
    STOP,
    SUCCESS,
    USER_AGENT,
    WAIT,
    DecisionHook,
    LoopwardenError,
    TaskStopped,
    ToolReport,
    _adrive,
    _Api,
    _Call,
    _drive,
    _Flow,
    _http_options,
    _Invoke,
    _tool_flow,
    _unwrap_items,
    error_from_response,
    parse_response,
)

__all__ = [
    "AsyncClient",
    "AsyncTaskSession",
    "Client",
    "LoopwardenError",
    "ModelCall",
    "Plan",
    "TaskSession",
    "TaskStopped",
    "ToolReport",
    "arun",
    "run",
]

# These are defined in agents._client_flow so the shared flows can use them, but they belong to
# this module's public surface: tracebacks, reprs and pickles keep naming agents.client.
for _public in (LoopwardenError, TaskStopped, ToolReport):
    _public.__module__ = __name__
del _public


# -- clients -----------------------------------------------------------------------------------


class Client(_Api[JSON, list[JSON], Any]):
    """Synchronous client. `on_decision(endpoint, request, answer)` sees every guard decision."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        on_decision: DecisionHook | None = None,
    ) -> None:
        self._http = httpx.Client(transport=transport, **_http_options(base_url, token, timeout))
        self.on_decision = on_decision

    def _send(self, call: _Call) -> Any:
        response = self._http.request(call.method, call.path, json=call.body, params=call.params)
        return parse_response(call, response, self.on_decision)

    def session(
        self,
        task_id: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        max_wait_tries: int = 30,
    ) -> TaskSession:
        """A `TaskSession` bound to `task_id`."""
        return TaskSession(self, task_id, sleep=sleep, max_wait_tries=max_wait_tries)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClient(_Api[Awaitable[JSON], Awaitable[list[JSON]], Awaitable[Any]]):
    """Asynchronous client: the same methods as `Client`, as coroutines."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        on_decision: DecisionHook | None = None,
    ) -> None:
        options = _http_options(base_url, token, timeout)
        self._http = httpx.AsyncClient(transport=transport, **options)
        self.on_decision = on_decision

    async def _send(self, call: _Call) -> Any:
        response = await self._http.request(
            call.method, call.path, json=call.body, params=call.params
        )
        return parse_response(call, response, self.on_decision)

    def session(
        self,
        task_id: str,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_wait_tries: int = 30,
    ) -> AsyncTaskSession:
        """An `AsyncTaskSession` bound to `task_id`."""
        return AsyncTaskSession(self, task_id, sleep=sleep, max_wait_tries=max_wait_tries)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


# -- plans and model calls ---------------------------------------------------------------------


@dataclass
class Plan:
    """One planning step of the model: the tool calls it asked for, or that it is done.

    `tool_calls` items are `{"name", "args", "effect"?, "operation_key"?, "job_id"?, "id"?}`.
    `evidence` for `finish` must come from the verifier; tokens are the call's real usage.
    """

    tool_calls: list[JSON] = field(default_factory=list)
    done: bool = False
    evidence: JSON | None = None
    answer: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    output_text: str | None = None


@dataclass
class ModelCall:
    """An allowed model call. Call `usage(...)` once the model answered."""

    task_id: str
    model_call: int
    round: int | None = None
    answer: JSON | None = None  # the usage report's answer, after the block exits
    _usage: JSON | None = field(default=None, init=False, repr=False)

    def usage(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        tool_calls: list[Mapping[str, Any]] | None = None,
        output_text: str | None = None,
    ) -> None:
        """Record the real usage; it is reported when the `with` block exits."""
        self._usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "tool_calls": tool_calls,
            "output_text": output_text,
        }

    def _report(self) -> _Call | None:
        if self._usage is None:
            return None
        return _CALLS.report_usage(self.task_id, self.model_call, **self._usage)


def _unreported(call: ModelCall) -> None:
    # stacklevel: this function, _usage_flow, _advance, the driver, model_call, the context
    # manager's exit, then the caller's `with` line, which is where the warning belongs.
    warnings.warn(
        f"model call {call.model_call} left without usage(); its reservation will be charged",
        stacklevel=7,
    )


def _usage_flow(call: ModelCall, error: BaseException | None) -> _Flow[None]:
    """Report a model call's usage as its `with` block exits; `error` is what the block raised.

    The usage is reported on an exception too, if it was set: the money was spent. A failed
    report then must not replace the block's own exception; it is noted on it instead.
    """
    report = call._report()
    if report is None:
        if error is None:
            _unreported(call)
        return
    if error is None:
        call.answer = yield report
        return
    try:
        call.answer = yield report
    except (TaskStopped, LoopwardenError, httpx.HTTPError) as exc:
        # The body's own exception matters more; the stop (sticky) is repeated by the next call.
        error.add_note(f"loopwarden: usage report after this error answered: {exc}")


# -- the agent loop ----------------------------------------------------------------------------


def _as_plan(value: Plan | Mapping[str, Any]) -> Plan:
    return value if isinstance(value, Plan) else Plan(**value)


def _run_flow(
    task_id: str,
    plan: Callable[[list[JSON]], Any],
    execute: Callable[[str, Any], Any],
    inspect: Callable[[str, Any, Any], Any] | None,
    *,
    max_rounds: int,
    model: str | None,
    est_prompt_tokens: int | None,
    max_output_tokens: int | None,
    max_wait_tries: int,
) -> _Flow[JSON]:
    """The agent loop of `run` and `arun`; returns the task JSON however it ends."""
    gate = {
        "model": model,
        "est_prompt_tokens": est_prompt_tokens,
        "max_output_tokens": max_output_tokens,
    }
    history: list[JSON] = []
    try:
        for _ in range(max_rounds):
            allowed = yield _CALLS.gate_model_call(task_id, **gate)
            model_call = int(allowed["model_call"])
            step = _as_plan((yield _Invoke(plan, (history,))))
            yield _CALLS.report_usage(
                task_id,
                model_call,
                prompt_tokens=step.prompt_tokens,
                completion_tokens=step.completion_tokens,
                tool_calls=step.tool_calls,
                output_text=step.output_text or step.answer,
            )
            history.append(
                {
                    "role": "assistant",
                    "round": allowed.get("round"),
                    "tool_calls": step.tool_calls,
                    "answer": step.answer,
                }
            )
            if step.done:
                return (yield _CALLS.finish(task_id, evidence=step.evidence, answer=step.answer))
            for call in step.tool_calls:
                name, args = call["name"], dict(call.get("args") or {})
                message = yield from _tool_flow(
                    task_id,
                    name,
                    args,
                    partial(execute, name),
                    effect=call.get("effect", "read"),
                    operation_key=call.get("operation_key"),
                    job_id=call.get("job_id"),
                    call_id=call.get("id"),
                    model_call=model_call,
                    inspect=partial(inspect, name, args) if inspect is not None else None,
                    max_wait_tries=max_wait_tries,
                )
                history.append({"role": "tool", "name": name, "args": args, "content": message})
        # A client-side bound too: never leave a task RUNNING because the loop gave up.
        reason = f"client loop gave up after {max_rounds} rounds"
        return (yield _CALLS.stop(task_id, reason=reason))
    except TaskStopped:
        pass
    return (yield _CALLS.get_task(task_id))


# -- sessions and run --------------------------------------------------------------------------


C = TypeVar("C", "Client", "AsyncClient")


class _SessionBase(Generic[C]):
    """State shared by the sync and async sessions: the task, the last model call, the waits."""

    def __init__(self, client: C, task_id: str, *, sleep: Any, max_wait_tries: int = 30) -> None:
        self.client = client
        self.task_id = str(task_id)
        self.last_model_call: int | None = None
        self._sleep = sleep
        self._max_wait_tries = max_wait_tries

    def _allowed(self, answer: JSON) -> ModelCall:
        call = ModelCall(self.task_id, int(answer["model_call"]), answer.get("round"))
        self.last_model_call = call.model_call
        return call

    def _tool_flow(
        self,
        tool: str,
        args: Mapping[str, Any],
        execute: Callable[[Any], Any],
        *,
        effect: str,
        operation_key: str | None,
        job_id: str | None,
        inspect: Callable[[Any], Any] | None,
        call_id: str | None,
        model_call: int | None,
    ) -> _Flow[JSON]:
        return _tool_flow(
            self.task_id,
            tool,
            args,
            execute,
            effect=effect,
            operation_key=operation_key,
            job_id=job_id,
            call_id=call_id,
            model_call=model_call if model_call is not None else self.last_model_call,
            inspect=inspect,
            max_wait_tries=self._max_wait_tries,
        )


class TaskSession(_SessionBase["Client"]):
    """Helpers bound to one task: wrap each model call and each tool execution."""

    def __init__(
        self,
        client: Client,
        task_id: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        max_wait_tries: int = 30,
    ) -> None:
        super().__init__(client, task_id, sleep=sleep, max_wait_tries=max_wait_tries)

    @contextmanager
    def model_call(
        self,
        *,
        model: str | None = None,
        est_prompt_tokens: int | None = None,
        max_output_tokens: int | None = None,
    ) -> Iterator[ModelCall]:
        """Gate (TaskStopped on STOP), yield the handle, report its usage on exit.

        The usage is reported on an exception too, if it was set: the money was spent.
        """
        call = self._allowed(
            self.client.gate_model_call(
                self.task_id,
                model=model,
                est_prompt_tokens=est_prompt_tokens,
                max_output_tokens=max_output_tokens,
            )
        )
        try:
            yield call
        except BaseException as error:
            _drive(_usage_flow(call, error), self.client._send, self._sleep)
            raise
        _drive(_usage_flow(call, None), self.client._send, self._sleep)

    def tool(
        self,
        tool: str,
        args: Mapping[str, Any],
        execute: Callable[[Any], Any],
        *,
        effect: str = "read",
        operation_key: str | None = None,
        job_id: str | None = None,
        inspect: Callable[[Any], Any] | None = None,
        call_id: str | None = None,
        model_call: int | None = None,
    ) -> JSON:
        """Run one tool call under the guard and return the tool message for the model.

        EXECUTE runs `execute(args)`, which returns a `ToolReport` or plain data (SUCCESS);
        `inspect(data)` supplies the evidence of a SUCCESS that carries none. An exception from
        either is reported as NO_RESULT (the tool may or may not have acted). REUSE gives the
        stored result, BLOCK the guard's observation; WAIT (up to `max_wait_tries` requests)
        and a result's `wait_ms` are slept out. Raises TaskStopped on STOP, chained to the
        tool's exception if there was one. `model_call` defaults to the last gated call.
        """
        flow = self._tool_flow(
            tool,
            args,
            execute,
            effect=effect,
            operation_key=operation_key,
            job_id=job_id,
            inspect=inspect,
            call_id=call_id,
            model_call=model_call,
        )
        return _drive(flow, self.client._send, self._sleep)

    def finish(self, evidence: Mapping[str, Any] | None = None, answer: str | None = None) -> JSON:
        """Declare the task done; returns the task (COMPLETED only with `evidence.done`)."""
        return self.client.finish(self.task_id, evidence=evidence, answer=answer)

    def stop(self, reason: str | None = None) -> JSON:
        """Stop the task (agent_stop); returns the task."""
        return self.client.stop(self.task_id, reason=reason)

    def get(self) -> JSON:
        """The task as it is now."""
        return self.client.get_task(self.task_id)


class AsyncTaskSession(_SessionBase["AsyncClient"]):
    """`TaskSession` for `AsyncClient`; `execute` and `inspect` may be sync or async."""

    def __init__(
        self,
        client: AsyncClient,
        task_id: str,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_wait_tries: int = 30,
    ) -> None:
        super().__init__(client, task_id, sleep=sleep, max_wait_tries=max_wait_tries)

    @asynccontextmanager
    async def model_call(
        self,
        *,
        model: str | None = None,
        est_prompt_tokens: int | None = None,
        max_output_tokens: int | None = None,
    ) -> AsyncIterator[ModelCall]:
        """See `TaskSession.model_call`."""
        call = self._allowed(
            await self.client.gate_model_call(
                self.task_id,
                model=model,
                est_prompt_tokens=est_prompt_tokens,
                max_output_tokens=max_output_tokens,
            )
        )
        try:
            yield call
        except BaseException as error:
            await _adrive(_usage_flow(call, error), self.client._send, self._sleep)
            raise
        await _adrive(_usage_flow(call, None), self.client._send, self._sleep)

    async def tool(
        self,
        tool: str,
        args: Mapping[str, Any],
        execute: Callable[[Any], Any],
        *,
        effect: str = "read",
        operation_key: str | None = None,
        job_id: str | None = None,
        inspect: Callable[[Any], Any] | None = None,
        call_id: str | None = None,
        model_call: int | None = None,
    ) -> JSON:
        """See `TaskSession.tool`."""
        flow = self._tool_flow(
            tool,
            args,
            execute,
            effect=effect,
            operation_key=operation_key,
            job_id=job_id,
            inspect=inspect,
            call_id=call_id,
            model_call=model_call,
        )
        return await _adrive(flow, self.client._send, self._sleep)

    async def finish(
        self, evidence: Mapping[str, Any] | None = None, answer: str | None = None
    ) -> JSON:
        """Declare the task done; returns the task (COMPLETED only with `evidence.done`)."""
        return await self.client.finish(self.task_id, evidence=evidence, answer=answer)

    async def stop(self, reason: str | None = None) -> JSON:
        """Stop the task (agent_stop); returns the task."""
        return await self.client.stop(self.task_id, reason=reason)

    async def get(self) -> JSON:
        """The task as it is now."""
        return await self.client.get_task(self.task_id)


def run(
    client: Client,
    task_id: str,
    plan: Callable[[list[JSON]], Plan | Mapping[str, Any]],
    execute: Callable[[str, Any], Any],
    inspect: Callable[[str, Any, Any], Any] | None = None,
    *,
    max_rounds: int = 100,
    model: str | None = None,
    est_prompt_tokens: int | None = None,
    max_output_tokens: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    max_wait_tries: int = 30,
) -> JSON:
    """Drive a whole agent loop under the guard and return the final task JSON.

    Each round: gate the model call; `plan(history)` returns a `Plan`; report its usage and tool
    calls; if `done`, finish with its evidence; else run each tool call (`execute(name, args)`,
    evidence from `inspect(name, args, data)`) and append the tool messages to `history`
    (`{"role": "assistant", ...}` then `{"role": "tool", "name", "args", "content"}` items).
    A guard STOP ends the loop: the task is fetched so its `report` says why. After
    `max_rounds` the task is stopped (agent_stop) rather than left running.
    """
    flow = _run_flow(
        str(task_id),
        plan,
        execute,
        inspect,
        max_rounds=max_rounds,
        model=model,
        est_prompt_tokens=est_prompt_tokens,
        max_output_tokens=max_output_tokens,
        max_wait_tries=max_wait_tries,
    )
    return _drive(flow, client._send, sleep)


async def arun(
    client: AsyncClient,
    task_id: str,
    plan: Callable[[list[JSON]], Any],
    execute: Callable[[str, Any], Any],
    inspect: Callable[[str, Any, Any], Any] | None = None,
    *,
    max_rounds: int = 100,
    model: str | None = None,
    est_prompt_tokens: int | None = None,
    max_output_tokens: int | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    max_wait_tries: int = 30,
) -> JSON:
    """`run` for `AsyncClient`; `plan`, `execute` and `inspect` may be sync or async."""
    flow = _run_flow(
        str(task_id),
        plan,
        execute,
        inspect,
        max_rounds=max_rounds,
        model=model,
        est_prompt_tokens=est_prompt_tokens,
        max_output_tokens=max_output_tokens,
        max_wait_tries=max_wait_tries,
    )
    return await _adrive(flow, client._send, sleep)
