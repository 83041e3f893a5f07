"""The sync and async shells over the sans-I/O core: clients, task sessions and `run`.

    client = Client("http://127.0.0.1:8000/api/v1/", token)
    task = client.create_task("Export every invoice")
    session = client.session(task["id"])
    with session.model_call(model="gpt-4o", est_prompt_tokens=2000) as call:
        reply = llm(...)                       # the paid call, only after ALLOW
        call.usage(reply.prompt_tokens, reply.completion_tokens, tool_calls=reply.tool_calls)
    message = session.tool("fetch_page", {"page": 1}, fetch_page, inspect=verify_page)

or let `run(client, task_id, plan, execute, inspect)` drive the whole loop. Every guard STOP
raises `TaskStopped` (sticky: asking again only repeats it), except a tool result that
completes the task, which is success; refused requests raise `LoopwardenError`; network
failures surface as httpx exceptions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Generic, TypeVar

import httpx

from loopwarden_client._core import (
    Api,
    DecisionHook,
    Request,
    http_options,
    parse_response,
    throttle_delay,
)
from loopwarden_client._flows import (
    Flow,
    adrive,
    drive,
    run_flow,
    tool_flow,
    usage_flow,
    warn_at_caller,
)
from loopwarden_client.types import JSON, ModelCall, Plan, ToolOutcome


class Client(Api[JSON, list[JSON], Any]):
    """Synchronous client. `on_decision(endpoint, request, answer)` sees every guard decision.

    A 429 `THROTTLED` is sent again after its Retry-After, up to `max_throttle_tries` sends.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        on_decision: DecisionHook | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_throttle_tries: int = 5,
    ) -> None:
        self._http = httpx.Client(transport=transport, **http_options(base_url, token, timeout))
        self.on_decision = on_decision
        self._sleep = sleep
        self.max_throttle_tries = max_throttle_tries

    def _send(self, request: Request) -> Any:
        tries = 1
        while True:
            response = self._http.request(
                request.method, request.path, json=request.body, params=request.params
            )
            delay = throttle_delay(response, tries, self.max_throttle_tries)
            if delay is None:
                return parse_response(request, response, self.on_decision)
            self._sleep(delay)
            tries += 1

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


class AsyncClient(Api[Awaitable[JSON], Awaitable[list[JSON]], Awaitable[Any]]):
    """Asynchronous client: the same methods as `Client`, as coroutines."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
        on_decision: DecisionHook | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_throttle_tries: int = 5,
    ) -> None:
        options = http_options(base_url, token, timeout)
        self._http = httpx.AsyncClient(transport=transport, **options)
        self.on_decision = on_decision
        self._sleep = sleep
        self.max_throttle_tries = max_throttle_tries

    async def _send(self, request: Request) -> Any:
        tries = 1
        while True:
            response = await self._http.request(
                request.method, request.path, json=request.body, params=request.params
            )
            delay = throttle_delay(response, tries, self.max_throttle_tries)
            if delay is None:
                return parse_response(request, response, self.on_decision)
            await self._sleep(delay)
            tries += 1

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


# -- sessions ----------------------------------------------------------------------------------

C = TypeVar("C", "Client", "AsyncClient")


class _SessionBase(Generic[C]):
    """State shared by the sync and async sessions: the task, the last model call, the waits.

    `report` is set once a tool result completed the task (COMPLETED on the verifier's
    evidence): the agent's loop should end there, since the next gate answers STOP.
    """

    def __init__(self, client: C, task_id: str, *, sleep: Any, max_wait_tries: int = 30) -> None:
        self.client = client
        self.task_id = str(task_id)
        self.last_model_call: int | None = None
        self.report: JSON | None = None
        self.sleep = sleep
        self.max_wait_tries = max_wait_tries

    def _allowed(self, answer: JSON) -> ModelCall:
        call = ModelCall(self.task_id, int(answer["model_call"]), answer.get("round"))
        self.last_model_call = call.model_call
        return call

    def tool_flow(
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
    ) -> Flow[ToolOutcome]:
        """The guarded tool call as a flow, for adapters that drive it themselves."""
        outcome = yield from tool_flow(
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
            max_wait_tries=self.max_wait_tries,
        )
        if outcome.report is not None:
            self.report = outcome.report
        return outcome


def _unreported(call: ModelCall) -> None:
    warn_at_caller(
        f"model call {call.model_call} left without usage(); its reservation will be charged"
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

    def drive(self, flow: Flow[Any]) -> Any:
        """Run a flow with this session's client and sleep."""
        return drive(flow, self.client._send, self.sleep)

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
            self.drive(usage_flow(call, error))
            raise
        if not self.drive(usage_flow(call, None)):
            _unreported(call)

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
        tool's exception if there was one; a result that completes the task returns normally
        and sets `self.report`. `model_call` defaults to the last gated call.
        """
        flow = self.tool_flow(
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
        return self.drive(flow).message

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

    async def drive(self, flow: Flow[Any]) -> Any:
        """Run a flow with this session's client and sleep."""
        return await adrive(flow, self.client._send, self.sleep)

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
            await self.drive(usage_flow(call, error))
            raise
        if not await self.drive(usage_flow(call, None)):
            _unreported(call)

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
        flow = self.tool_flow(
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
        return (await self.drive(flow)).message

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


# -- run ---------------------------------------------------------------------------------------


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
    However the loop ends, completed or stopped by the guard, the task is returned (never
    raised): its `state` and `report` say how. After `max_rounds` the task is stopped
    (agent_stop) rather than left running.
    """
    flow = run_flow(
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
    return drive(flow, client._send, sleep)


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
    flow = run_flow(
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
    return await adrive(flow, client._send, sleep)
