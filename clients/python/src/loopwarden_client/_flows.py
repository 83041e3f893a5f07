"""The client without I/O, part two: the tool, usage and loop logic, written once.

Each flow is a generator that yields the steps it needs (a `Request` to send, a `Sleep`, an
`Invoke` of application code) and receives each step's answer; `drive` runs a flow
synchronously and `adrive` asynchronously. The two drivers are the only place where sync and
async differ. Nothing here is public API: import from `loopwarden_client`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect as _inspect
import sys
import time
import uuid
import warnings
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import httpx

from loopwarden_client._core import (
    REQUESTS,
    DecisionHook,
    Request,
    parse_response,
    tool_args,
    unwrap_items,
)
from loopwarden_client._retry import DEFAULT_RETRY, UNSENT, RetryPolicy
from loopwarden_client.errors import LoopwardenError, TaskStopped
from loopwarden_client.novelty import result_hash
from loopwarden_client.types import (
    BLOCK,
    COMPLETED,
    EXECUTE,
    JSON,
    NO_RESULT,
    REUSE,
    SUCCESS,
    WAIT,
    ModelCall,
    Plan,
    ToolOutcome,
    ToolReport,
)

# -- flows and their drivers -------------------------------------------------------------------


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Invoke:
    """Call application code (execute, inspect, plan); the async driver awaits awaitables."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


T = TypeVar("T")
Flow = Generator[Request | Sleep | Invoke, Any, T]
Send = Callable[[Request], Any]


class _Steps:
    """A flow's steps, one at a time, and what each answered, handed back into the flow.

    Iterate it for the steps; perform each inside `with steps:`, setting `steps.reply`. An
    exception the step raises is caught there and thrown back into the flow at its `yield`.
    Once the flow has returned, iteration ends and `value` holds what it returned. Both
    drivers go through here, so they keep the same contract with the flows.
    """

    def __init__(self, flow: Flow[Any]) -> None:
        self.flow = flow
        self.reply: Any = None
        self.error: Exception | None = None
        self.value: Any = None

    def __iter__(self) -> _Steps:
        return self

    def __next__(self) -> Request | Sleep | Invoke:
        reply, error, self.reply, self.error = self.reply, self.error, None, None
        try:
            return self.flow.throw(error) if error is not None else self.flow.send(reply)
        except StopIteration as done:
            self.value = done.value
            raise StopIteration from None

    def __enter__(self) -> _Steps:
        return self

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> bool:
        if isinstance(error, Exception):
            self.error = error
            return True
        return False


def drive(flow: Flow[T], send: Send, sleep: Callable[[float], None]) -> T:
    """Run a flow synchronously; a step's exception is thrown back into the flow."""
    steps = _Steps(flow)
    for step in steps:
        with steps:
            steps.reply = _perform(step, send, sleep)
    return steps.value


def _perform(step: Request | Sleep | Invoke, send: Send, sleep: Callable[[float], None]) -> Any:
    if isinstance(step, Request):
        return send(step)
    if isinstance(step, Sleep):
        return sleep(step.seconds)
    reply = step.fn(*step.args)
    if _inspect.isawaitable(reply):
        if asyncio.iscoroutine(reply):
            reply.close()
        raise _async_refused(step.fn)
    return reply


def _async_refused(fn: Callable[..., Any]) -> TypeError:
    return TypeError(f"{fn!r} is async: use AsyncTaskSession or arun")


def refuse_async(*fns: Callable[..., Any] | None) -> None:
    """Raise before anything is asked when application code the sync driver is about to be
    given is declared `async def`: found only once the guard had answered EXECUTE, it would
    be reported as NO_RESULT, and a write that never ran would become UNKNOWN."""
    for fn in fns:
        if fn is not None and (
            _inspect.iscoroutinefunction(fn)
            or _inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004
        ):
            raise _async_refused(fn)


async def adrive(
    flow: Flow[T],
    send: Callable[[Request], Awaitable[Any]],
    sleep: Callable[[float], Awaitable[None]],
) -> T:
    """Run a flow asynchronously; application code may be sync or async."""
    steps = _Steps(flow)
    for step in steps:
        with steps:
            steps.reply = await _aperform(step, send, sleep)
    return steps.value


async def _aperform(
    step: Request | Sleep | Invoke,
    send: Callable[[Request], Awaitable[Any]],
    sleep: Callable[[float], Awaitable[None]],
) -> Any:
    if isinstance(step, Request):
        return await send(step)
    if isinstance(step, Sleep):
        return await sleep(step.seconds)
    reply = step.fn(*step.args)
    return await reply if _inspect.isawaitable(reply) else reply


def send_flow(request: Request, retry: RetryPolicy, hook: DecisionHook | None) -> Flow[Any]:
    """One request as the clients send it: the driver's `send` transmits it and hands back the
    HTTP response, sent again as long as `retry` says so (a refusal the server rolled back, a
    connection never made, a decision's lost answer), and read by `parse_response`. A paginated
    request (`request.pages`) follows every `next` link (its query, on the request's own path) and
    answers every page's items together."""
    if not request.pages:
        return (yield from _sent(request, retry, hook))
    page = replace(request, items=None)
    whole: dict[str, Any] = {}
    while True:
        body = yield from _sent(page, retry, hook)
        if not isinstance(body, dict):
            raise LoopwardenError(200, "BAD_RESPONSE", f"expected a page of {request.pages}")
        for key, value in body.items():
            if key in request.pages and isinstance(value, list):
                whole.setdefault(key, []).extend(value)
            else:
                whole[key] = value
        link = body.get("next")
        if not link:
            break
        page = replace(page, params=_query(link))
    if request.items is not None:
        return unwrap_items(whole, request.items, 200)
    return whole


def _query(link: Any) -> dict[str, str]:
    """A `next` link's query, sent on the request's own path: the link names the host the
    server believes it has (behind a proxy that rewrites `Host`, one the client never chose),
    and the pages, the token with them, go only where the base URL says."""
    return dict(parse_qsl(urlsplit(str(link)).query, keep_blank_values=True))


def _sent(request: Request, retry: RetryPolicy, hook: DecisionHook | None) -> Flow[Any]:
    sent, tries = retry.identified(request), 1
    while True:
        try:
            response = yield sent
        except httpx.TransportError as exc:
            delay = retry.after_lost(exc, request, tries)
            if delay is None:
                raise
        else:
            delay = retry.after_refusal(response, tries, request)
            if delay is None:
                return parse_response(request, response, hook)
        yield Sleep(delay)
        tries += 1


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def tool_flow(
    task_id: str,
    tool: str,
    args: Mapping[str, Any],
    execute: Callable[[Any], Any],
    *,
    effect: str,
    operation_key: str | None,
    job_id: str | None,
    call_id: str | None,
    model_call: int | None,
    inspect: Callable[[Any], Any] | None,
    max_wait_tries: int,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> Flow[ToolOutcome]:
    """Request, honour WAIT, execute on EXECUTE, report; return the tool message and decision.

    A result that completes the task (STOP with a COMPLETED report) is success, not an error:
    the outcome carries the report. Every other STOP raises TaskStopped.
    """
    request = REQUESTS.request_tool(
        task_id,
        tool,
        args,
        effect=effect,
        operation_key=operation_key,
        job_id=job_id,
        call_id=call_id,
        model_call=model_call,
    )
    answer = yield request
    tries = 1
    while answer.get("decision") == WAIT:
        delay = retry.before_asking_again(answer.get("retry_after_ms"), tries, max_wait_tries)
        if delay is None:
            # Another call still holds the write; tell the model instead of waiting forever.
            message = {
                "success": False,
                "code": "OPERATION_IN_FLIGHT",
                "retryable": True,
                "message": f"{tool} is still running elsewhere under {operation_key}.",
            }
            return ToolOutcome(message, WAIT)
        yield Sleep(delay)
        answer = yield request
        tries += 1

    decision = answer.get("decision")
    if decision == BLOCK:
        observation = answer.get("observation") or {"success": False, "retryable": False}
        return ToolOutcome(dict(observation), BLOCK)
    if decision == REUSE:
        return ToolOutcome({"success": True, "reused": True, "data": answer.get("result")}, REUSE)
    if decision != EXECUTE:
        raise LoopwardenError(200, "BAD_RESPONSE", f"unexpected decision {decision!r}")

    failure: Exception | None = None
    started = time.monotonic()
    try:
        outcome = yield Invoke(execute, (args,))
        report = outcome if isinstance(outcome, ToolReport) else ToolReport(data=outcome)
        if inspect is not None and report.kind == SUCCESS and report.evidence is None:
            report = replace(report, evidence=(yield Invoke(inspect, (report.data,))))
    except Exception as exc:
        # The tool may or may not have acted: NO_RESULT, never a guessed failure or success.
        failure = exc
        report = ToolReport(kind=NO_RESULT, error=describe(exc))
    duration_ms = int((time.monotonic() - started) * 1000)
    try:
        reply = yield from _reported(task_id, int(answer["tool_call"]), report, duration_ms)
    except TaskStopped as stop:
        if stop.state == COMPLETED and failure is None:
            # The verifier's evidence finished the task: the run succeeded.
            return ToolOutcome(report.tool_message(), EXECUTE, executed=True, report=stop.report)
        if failure is not None:
            raise stop from failure
        raise
    if reply.get("wait_ms"):
        yield Sleep(reply["wait_ms"] / 1000)
    return ToolOutcome(report.tool_message(), EXECUTE, executed=True)


def _reported(task_id: str, tool_call: int, report: ToolReport, duration_ms: int) -> Flow[Any]:
    """Report what an execution produced. The tool ran, so its call must close (a committed
    write must reach the ledger): a report the server cannot take whole, refused for its size
    (413) or depth (BODY_TOO_DEEP), or with the connection dropped under it (a server that
    refuses a body before reading it may reset the connection), is sent once more without its
    data, the data's hash kept for the novelty rule; one that never reached the server (a
    connection never made) is sent once more whole. Both under one `request_id`: when the
    first did arrive (409 REQUEST_ID_REUSED for the second), it is sent again for its kept
    answer."""
    fields = {**report.result_fields(), "request_id": uuid.uuid4().hex}
    send = partial(REQUESTS.report_result, task_id, tool_call, report.kind, duration_ms=duration_ms)
    try:
        return (yield send(**fields))
    except UNSENT:
        # The server was not there (restarting past one round of sends): the body was never
        # the matter, so one more round sends it whole; the ledger keeps the result.
        return (yield send(**fields))
    except (LoopwardenError, httpx.TransportError) as failed:
        too_large = not isinstance(failed, LoopwardenError) or (
            failed.status == 413 or failed.code == "BODY_TOO_DEEP"
        )
        if "data" not in fields or not too_large:
            raise
    whole = dict(fields)
    fields["data_hash"] = report.data_hash or result_hash(fields["data"])  # the data as sent
    del fields["data"]
    try:
        return (yield send(**fields))
    except LoopwardenError as refused:
        if refused.code != "REQUEST_ID_REUSED":
            raise
    # The first did arrive (only its answers were lost): asked again whole, it is answered
    # the answer the server kept for it.
    return (yield send(**whole))


def usage_flow(call: ModelCall, error: BaseException | None) -> Flow[bool]:
    """Report a model call's usage as its `with` block exits; `error` is what the block raised.

    Returns False when there was no usage to report: the reservation will be charged, which a
    block that ended normally is warned about. The usage is reported on an exception too, if
    it was set: the money was spent. A failed report then must not replace the block's own
    exception; it is noted on it instead.
    """
    if call.reported_usage is None:
        if error is None:
            warn_at_caller(
                f"model call {call.model_call} left without usage(); "
                "its reservation will be charged"
            )
        return False
    report = REQUESTS.report_usage(call.task_id, call.model_call, **call.reported_usage)
    if error is None:
        call.answer = yield report
        return True
    try:
        call.answer = yield report
    except (TaskStopped, LoopwardenError, httpx.HTTPError) as exc:
        # The body's own exception matters more; the stop (sticky) is repeated by the next call.
        error.add_note(f"loopwarden: usage report after this error answered: {exc}")
    return True


# Both spellings of each path: a frame's co_filename keeps the path its module was imported by.
_PACKAGE_DIR = Path(__file__).parent
_SKIPPED = tuple(
    {
        str(_PACKAGE_DIR),
        str(_PACKAGE_DIR.resolve()),
        contextlib.__file__,
        str(Path(contextlib.__file__).resolve()),
    }
)


def warn_at_caller(message: str) -> None:
    """Warn at the first frame outside this package and contextlib: the user's own line.

    Found by walking the stack rather than by counting frames, which changes with every
    refactoring of the context managers and drivers in between.
    """
    frame = sys._getframe(1)  # the caller of this function: stacklevel 2
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_SKIPPED):
        frame = frame.f_back
        level += 1
    warnings.warn(message, stacklevel=level)


def _as_plan(value: Plan | Mapping[str, Any]) -> Plan:
    return value if isinstance(value, Plan) else Plan(**value)


def run_flow(
    task_id: str,
    plan: Callable[[list[JSON]], Any],
    execute: Callable[[str, Any], Any],
    inspect: Callable[[str, Any, Any], Any] | None,
    *,
    max_rounds: int = 100,
    model: str | None = None,
    est_prompt_tokens: int | None = None,
    max_output_tokens: int | None = None,
    max_wait_tries: int = 30,
    retry: RetryPolicy = DEFAULT_RETRY,
) -> Flow[JSON]:
    """The agent loop of `run` and `arun`; returns the task JSON however it ends."""
    gate = {
        "model": model,
        "est_prompt_tokens": est_prompt_tokens,
        "max_output_tokens": max_output_tokens,
    }
    history: list[JSON] = []
    try:
        for _ in range(max_rounds):
            allowed = yield REQUESTS.gate_model_call(task_id, **gate)
            model_call = int(allowed["model_call"])
            step = _as_plan((yield Invoke(plan, (history,))))
            yield REQUESTS.report_usage(
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
            if step.done or not step.tool_calls:  # no tool asked for: the final answer
                return (yield REQUESTS.finish(task_id, evidence=step.evidence, answer=step.answer))
            for call in step.tool_calls:
                name, args = call["name"], tool_args(call.get("args"))
                outcome = yield from tool_flow(
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
                    retry=retry,
                )
                history.append(
                    {"role": "tool", "name": name, "args": args, "content": outcome.message}
                )
                if outcome.report is not None:  # the task completed on this tool's evidence
                    return (yield REQUESTS.get_task(task_id))
        # A client-side bound too: never leave a task RUNNING because the loop gave up.
        reason = f"client loop gave up after {max_rounds} rounds"
        return (yield REQUESTS.stop(task_id, reason=reason))
    except TaskStopped:
        pass
    return (yield REQUESTS.get_task(task_id))
