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
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypedDict, TypeVar, Unpack

import httpx

from loopwarden_client._core import (
    DEFAULT_TIMEOUT_SECONDS,
    REQUESTS,
    Api,
    DecisionHook,
    Request,
    http_options,
    json_body,
)
from loopwarden_client._flows import (
    Flow,
    adrive,
    drive,
    refuse_async,
    run_flow,
    send_flow,
    tool_flow,
    usage_flow,
)
from loopwarden_client._retry import RetryPolicy
from loopwarden_client.types import JSON, ModelCall, Plan, ToolOutcome

D = TypeVar("D")  # what a call answering a JSON object returns
L = TypeVar("L")  # ... a list of objects
A = TypeVar("A")  # ... any JSON


class ClientOptions(TypedDict, total=False):
    """What both clients take beside the URL, the token, the transport and the sleep: the HTTP
    `timeout` in seconds (30), `on_decision(endpoint, request, answer)`, called with every guard
    decision, and `max_throttle_tries` (5), the sends of one request that the retry policy
    sends again (`_retry.RetryPolicy`: a refusal made before anything was decided, a
    connection never made, a decision's lost answer)."""

    timeout: float
    on_decision: DecisionHook | None
    max_throttle_tries: int


class _Shell(Api[D, L, A]):
    """What the two clients share: one HTTP connection pool and how every request is sent."""

    def __init__(
        self,
        http: Callable[..., httpx.Client | httpx.AsyncClient],
        base_url: str,
        token: str,
        transport: Any,
        sleep: Callable[[float], Any],
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        on_decision: DecisionHook | None = None,
        max_throttle_tries: int = 5,
    ) -> None:
        self._http = http(transport=transport, **http_options(base_url, token, timeout))
        self.on_decision = on_decision
        self._sleep = sleep
        self.retry = RetryPolicy(max_tries=max_throttle_tries)

    @property
    def max_throttle_tries(self) -> int:
        return self.retry.max_tries

    def _sending(self, request: Request) -> Flow[Any]:
        return send_flow(request, self.retry, self.on_decision)

    def _transmit(self, request: Request) -> Any:
        """The HTTP response (a coroutine of it, for the async client)."""
        if request.body is None:
            return self._http.request(request.method, request.path, params=request.params)
        return self._http.request(
            request.method,
            request.path,
            content=json_body(request.body),
            headers={"Content-Type": "application/json"},
            params=request.params,
        )


class Client(_Shell[JSON, list[JSON], Any]):
    """Synchronous client. `on_decision(endpoint, request, answer)` sees every guard decision.

    A refused request, a connection never made and a decision whose answer was lost are sent
    again as `self.retry` (a `RetryPolicy`) says, up to `max_throttle_tries` sends (`options`:
    see `ClientOptions`). Every decision carries a `request_id` of its own, so the server
    answers a repeat with the first answer and counts nothing; any other request's lost answer
    is raised: the server may have acted on it.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(httpx.Client, base_url, token, transport, sleep, **options)

    def _send(self, request: Request) -> Any:
        return drive(self._sending(request), self._transmit, self._sleep)

    def session(self, task_id: str, **options: Unpack[SessionOptions]) -> TaskSession:
        """A `TaskSession` bound to `task_id` (`sleep`, `max_wait_tries`: see the session)."""
        return TaskSession(self, task_id, **options)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClient(_Shell[Awaitable[JSON], Awaitable[list[JSON]], Awaitable[Any]]):
    """Asynchronous client: the same methods as `Client`, as coroutines."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(httpx.AsyncClient, base_url, token, transport, sleep, **options)

    async def _send(self, request: Request) -> Any:
        return await adrive(self._sending(request), self._transmit, self._sleep)

    def session(self, task_id: str, **options: Unpack[SessionOptions]) -> AsyncTaskSession:
        """An `AsyncTaskSession` bound to `task_id` (`sleep`, `max_wait_tries`: see the session)."""
        return AsyncTaskSession(self, task_id, **options)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


# -- sessions ----------------------------------------------------------------------------------


class SessionOptions(TypedDict, total=False):
    """A session's settings: how it sleeps out a WAIT (the session's kind of sleep: plain for
    `TaskSession`, awaitable for `AsyncTaskSession`) and how many WAITs it sleeps out."""

    sleep: Callable[[float], Any]
    max_wait_tries: int


class ToolOptions(TypedDict, total=False):
    """How one tool call is guarded; see `TaskSession.tool`."""

    effect: str
    operation_key: str | None
    job_id: str | None
    inspect: Callable[[Any], Any] | None
    call_id: str | None
    model_call: int | None


class _Scope:
    """One model call's `with` block: gated on entry, its usage reported on exit.

    The usage is reported on an exception too, if it was set: the money was spent.
    """

    def __init__(self, session: Any, gate: Request) -> None:
        self.session = session
        self.gate = gate
        self.call: ModelCall | None = None

    def _allowed(self, answer: JSON) -> ModelCall:
        self.call = ModelCall(self.session.task_id, int(answer["model_call"]), answer.get("round"))
        self.session.last_model_call = self.call.model_call
        return self.call

    def _settle(self, error: BaseException | None) -> Any:
        assert self.call is not None
        return self.session.drive(usage_flow(self.call, error))


class ModelCallScope(_Scope):
    """`with session.model_call(...) as call:` (TaskStopped on STOP)."""

    def __enter__(self) -> ModelCall:
        return self._allowed(self.session.client._send(self.gate))

    def __exit__(self, *exc_info: Any) -> None:
        self._settle(exc_info[1])


class AsyncModelCallScope(_Scope):
    """`async with session.model_call(...) as call:` (TaskStopped on STOP)."""

    async def __aenter__(self) -> ModelCall:
        return self._allowed(await self.session.client._send(self.gate))

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._settle(exc_info[1])


C = TypeVar("C", "Client", "AsyncClient")
R = TypeVar("R")  # what a session call returns: JSON, or an awaitable of it
M = TypeVar("M", ModelCallScope, AsyncModelCallScope)


def _message(flow: Flow[ToolOutcome]) -> Flow[JSON]:
    outcome = yield from flow
    return outcome.message


class _SessionBase(Generic[C, R, M]):
    """Helpers bound to one task, written once for the sync and async sessions; the two differ
    only in how they drive a flow and in their kind of sleep.

    `report` is set once a tool result completed the task (COMPLETED on the verifier's
    evidence): the agent's loop should end there, since the next gate answers STOP.
    """

    _scope: type[M]
    _default_sleep: Callable[[float], Any]

    def __init__(
        self,
        client: C,
        task_id: str,
        *,
        sleep: Callable[[float], Any] | None = None,
        max_wait_tries: int = 30,
    ) -> None:
        self.client = client
        self.task_id = str(task_id)
        self.last_model_call: int | None = None
        self.report: JSON | None = None
        self.sleep = sleep if sleep is not None else type(self)._default_sleep
        self.max_wait_tries = max_wait_tries

    def drive(self, flow: Flow[Any]) -> Any:
        """Run a flow with this session's client and sleep (awaitable for the async session)."""
        raise NotImplementedError

    def model_call(
        self,
        *,
        model: str | None = None,
        est_prompt_tokens: int | None = None,
        max_output_tokens: int | None = None,
    ) -> M:
        """Gate (TaskStopped on STOP), yield the handle, report its usage on exit.

        The usage is reported on an exception too, if it was set: the money was spent.
        """
        gate = REQUESTS.gate_model_call(
            self.task_id,
            model=model,
            est_prompt_tokens=est_prompt_tokens,
            max_output_tokens=max_output_tokens,
        )
        return self._scope(self, gate)

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
            retry=self.client.retry,
        )
        if outcome.report is not None:
            self.report = outcome.report
        return outcome

    def tool(
        self,
        tool: str,
        args: Mapping[str, Any],
        execute: Callable[[Any], Any],
        **options: Unpack[ToolOptions],
    ) -> R:
        """Run one tool call under the guard and return the tool message for the model.

        EXECUTE runs `execute(args)`, which returns a `ToolReport` or plain data (SUCCESS);
        `inspect(data)` supplies the evidence of a SUCCESS that carries none. An exception from
        either is reported as NO_RESULT (the tool may or may not have acted). REUSE gives the
        stored result, BLOCK the guard's observation; WAIT (up to `max_wait_tries` requests,
        the waits doubling from the server's `retry_after_ms` up to 15 s) and a result's
        `wait_ms` are slept out. Raises TaskStopped on STOP, chained to the
        tool's exception if there was one; a result that completes the task returns normally
        and sets `self.report`. `model_call` defaults to the last gated call. For the async
        session, `execute` and `inspect` may be sync or async.
        """
        return self.drive(_message(self.tool_flow(tool, args, execute, **options)))

    def finish(self, evidence: Mapping[str, Any] | None = None, answer: str | None = None) -> R:
        """Declare the task done; returns the task (COMPLETED only with `evidence.done`)."""
        return self.client._send(REQUESTS.finish(self.task_id, evidence=evidence, answer=answer))

    def stop(self, reason: str | None = None) -> R:
        """Stop the task (agent_stop); returns the task."""
        return self.client._send(REQUESTS.stop(self.task_id, reason=reason))

    def get(self) -> R:
        """The task as it is now."""
        return self.client._send(REQUESTS.get_task(self.task_id))


class TaskSession(_SessionBase["Client", JSON, ModelCallScope]):
    """Helpers bound to one task: wrap each model call and each tool execution."""

    _scope = ModelCallScope
    _default_sleep = staticmethod(time.sleep)

    def drive(self, flow: Flow[Any]) -> Any:
        """Run a flow with this session's client and sleep."""
        return drive(flow, self.client._send, self.sleep)

    def tool(
        self,
        tool: str,
        args: Mapping[str, Any],
        execute: Callable[[Any], Any],
        **options: Unpack[ToolOptions],
    ) -> JSON:
        """See `_SessionBase.tool`; an `async def` execute or inspect raises TypeError before
        the guard is asked (use `AsyncTaskSession`)."""
        refuse_async(execute, options.get("inspect"))
        return super().tool(tool, args, execute, **options)


class AsyncTaskSession(_SessionBase["AsyncClient", Awaitable[JSON], AsyncModelCallScope]):
    """`TaskSession` for `AsyncClient`: the same methods, as coroutines."""

    _scope = AsyncModelCallScope
    _default_sleep = staticmethod(asyncio.sleep)

    def drive(self, flow: Flow[Any]) -> Awaitable[Any]:
        """Run a flow with this session's client and sleep."""
        return adrive(flow, self.client._send, self.sleep)


# -- run ---------------------------------------------------------------------------------------


class RunOptions(TypedDict, total=False):
    """How `run` and `arun` drive the loop: at most `max_rounds` rounds (100), each model gate
    sent with `model`, `est_prompt_tokens` and `max_output_tokens`, and up to `max_wait_tries`
    WAITs (30) slept out per tool call."""

    max_rounds: int
    model: str | None
    est_prompt_tokens: int | None
    max_output_tokens: int | None
    max_wait_tries: int


def run(
    client: Client,
    task_id: str,
    plan: Callable[[list[JSON]], Plan | Mapping[str, Any]],
    execute: Callable[[str, Any], Any],
    inspect: Callable[[str, Any, Any], Any] | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    **options: Unpack[RunOptions],
) -> JSON:
    """Drive a whole agent loop under the guard and return the final task JSON.

    Each round: gate the model call; `plan(history)` returns a `Plan`; report its usage and tool
    calls; if `done`, or it asks for no tool call (the agent's final answer), finish with its
    evidence (COMPLETED only with `evidence.done`, else PARTIAL/goal_unverified); else run
    each tool call (`execute(name, args)`, evidence from `inspect(name, args, data)`) and
    append the tool messages to `history`
    (`{"role": "assistant", ...}` then `{"role": "tool", "name", "args", "content"}` items).
    However the loop ends, completed or stopped by the guard, the task is returned (never
    raised): its `state` and `report` say how. After `max_rounds` the task is stopped
    (agent_stop) rather than left running. `options`: see `RunOptions`.
    """
    refuse_async(plan, execute, inspect)
    flow = run_flow(str(task_id), plan, execute, inspect, retry=client.retry, **options)
    return drive(flow, client._send, sleep)


async def arun(
    client: AsyncClient,
    task_id: str,
    plan: Callable[[list[JSON]], Any],
    execute: Callable[[str, Any], Any],
    inspect: Callable[[str, Any, Any], Any] | None = None,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    **options: Unpack[RunOptions],
) -> JSON:
    """`run` for `AsyncClient`; `plan`, `execute` and `inspect` may be sync or async."""
    flow = run_flow(str(task_id), plan, execute, inspect, retry=client.retry, **options)
    return await adrive(flow, client._send, sleep)
