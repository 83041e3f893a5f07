"""The internals of `agents.client`, written once for its sync and async halves.

Import from `agents.client`, never from here. This module holds what both halves share: the
errors, every endpoint as a request not yet sent (`_Api`, and `_CALLS` which hands the request
back unsent), the reading of answers, `ToolReport`, and the tool logic written once as a
generator (`_tool_flow`) that the sync driver `_drive` and the async driver `_adrive` run step
by step. The two drivers are the only place where sync and async differ.
"""

from __future__ import annotations

import asyncio
import inspect as _inspect
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

JSON = dict[str, Any]
# Called with (endpoint name, request body, response body) for every answer carrying a decision.
DecisionHook = Callable[[str, JSON, JSON], None]

STOP, WAIT, BLOCK, REUSE, EXECUTE = "STOP", "WAIT", "BLOCK", "REUSE", "EXECUTE"
SUCCESS, RETRYABLE, PENDING, NO_RESULT = "SUCCESS", "RETRYABLE", "PENDING", "NO_RESULT"
DEFAULT_WAIT_MS = 1000  # when a WAIT forgets to say how long
USER_AGENT = "loopwarden-client/0.1"


# -- errors ------------------------------------------------------------------------------------


class LoopwardenError(Exception):
    """The API refused the request (HTTP 4xx/5xx), e.g. a bad envelope, a 404 or a 409.

    `code` is the error envelope's code (`TRIGGER_LOOP` on a 429 at task creation) or
    `HTTP_<status>` when the answer carried no envelope; `fields` maps field names to problems.
    """

    def __init__(
        self, status: int, code: str, message: str, fields: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.fields: dict[str, Any] = dict(fields or {})


class TaskStopped(Exception):
    """The guard answered STOP: the task is terminal; `report` is its stored stop report.

    Not meant to be caught and retried. A stop is sticky: every later call answers the same
    report, and only an operator's resume opens a new phase. Let it reach the top of the agent
    and show `state`, `reason`, `code` and the report's `resume_condition` to a human.
    """

    def __init__(self, report: Mapping[str, Any] | None, *, task_id: str | None = None) -> None:
        self.report: dict[str, Any] = dict(report or {})
        self.task_id = task_id
        self.state: str | None = self.report.get("state")
        self.reason: str | None = self.report.get("reason")
        self.code: str | None = self.report.get("code")
        suffix = f" ({self.code})" if self.code else ""
        super().__init__(f"task {task_id} stopped: {self.state}/{self.reason}{suffix}")


def error_from_response(response: httpx.Response) -> LoopwardenError:
    """Build the error for a 4xx/5xx answer, reading the `{"error": {...}}` envelope if any."""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        fields = error.get("fields")
        return LoopwardenError(
            status,
            str(error.get("code") or f"HTTP_{status}"),
            str(error.get("message") or response.reason_phrase),
            fields if isinstance(fields, dict) else None,
        )
    if isinstance(body, dict) and "detail" in body:  # a framework default, not our envelope
        return LoopwardenError(status, f"HTTP_{status}", str(body["detail"]))
    text = response.text.strip()[:200] or response.reason_phrase
    return LoopwardenError(status, f"HTTP_{status}", text)


# -- requests and answers ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """One API request, not yet sent, and how to read its answer."""

    name: str  # the client method that built it; handed to the decision hook
    method: str
    path: str  # relative to the base URL
    body: JSON | None = None
    params: dict[str, str] | None = None
    task_id: str | None = None
    stop_raises: bool = False  # a guard endpoint: STOP becomes TaskStopped
    items: str | None = None  # a list endpoint: the key holding the items, if wrapped


def _drop_none(**fields: Any) -> JSON:
    return {key: value for key, value in fields.items() if value is not None}


def _path(*parts: object) -> str:
    return "/".join(quote(str(part), safe="") for part in parts)


def _unwrap_items(body: Any, key: str, status: int) -> list[JSON]:
    """A list endpoint's items, whether answered bare or wrapped (`results` or `<key>`)."""
    if isinstance(body, list):
        return body
    if isinstance(body, dict):
        for wrapper in ("results", key):
            if isinstance(body.get(wrapper), list):
                return body[wrapper]
    raise LoopwardenError(status, "BAD_RESPONSE", f"expected a list of {key}")


def parse_response(call: _Call, response: httpx.Response, hook: DecisionHook | None = None) -> Any:
    """Decode an answer: raise on errors, report decisions to `hook`, raise TaskStopped on STOP."""
    if response.status_code >= 400:
        raise error_from_response(response)
    if not response.content:
        return {}
    try:
        body = response.json()
    except ValueError as exc:
        raise LoopwardenError(response.status_code, "BAD_RESPONSE", "not JSON") from exc
    if call.items is not None:
        return _unwrap_items(body, call.items, response.status_code)
    if isinstance(body, dict) and "decision" in body:
        if hook is not None:
            hook(call.name, call.body or {}, body)
        if call.stop_raises and body["decision"] == STOP:
            raise TaskStopped(body.get("report"), task_id=call.task_id)
    return body


# -- the endpoints, written once ---------------------------------------------------------------

D = TypeVar("D")  # what a call answering a JSON object returns
L = TypeVar("L")  # ... a list of objects
A = TypeVar("A")  # ... any JSON


class _Api(Generic[D, L, A]):
    """Every REST endpoint of DESIGN.md section 6. Subclasses decide what `_send` does."""

    def _send(self, call: _Call) -> Any:
        raise NotImplementedError

    # agent endpoints

    def create_task(
        self,
        goal: str,
        *,
        profile: str | None = None,
        limits: Mapping[str, Any] | None = None,
        external_ref: str | None = None,
        trigger_key: str | None = None,
    ) -> D:
        """Create a task (201). Limits may only tighten the profile's; 429 `TRIGGER_LOOP`."""
        body = _drop_none(
            goal=goal,
            profile=profile,
            limits=dict(limits) if limits is not None else None,
            external_ref=external_ref,
            trigger_key=trigger_key,
        )
        return self._send(_Call("create_task", "POST", "tasks", body))

    def get_task(self, task_id: str) -> D:
        """The task: id, state, reason, phase, limits, usage, remaining, revision, report."""
        return self._send(_Call("get_task", "GET", _path("tasks", task_id), task_id=task_id))

    def trace(self, task_id: str) -> A:
        """The task's ordered model calls, tool calls and events."""
        path = _path("tasks", task_id, "trace")
        return self._send(_Call("trace", "GET", path, task_id=task_id))

    def gate_model_call(
        self,
        task_id: str,
        *,
        model: str | None = None,
        est_prompt_tokens: int | None = None,
        max_output_tokens: int | None = None,
    ) -> D:
        """Ask before a paid model call: `{"decision": "ALLOW", "model_call", "round"}`.

        Raises TaskStopped on STOP.
        """
        body = _drop_none(
            model=model, est_prompt_tokens=est_prompt_tokens, max_output_tokens=max_output_tokens
        )
        path = _path("tasks", task_id, "model-calls")
        return self._send(
            _Call("gate_model_call", "POST", path, body, task_id=task_id, stop_raises=True)
        )

    def report_usage(
        self,
        task_id: str,
        model_call: int,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        tool_calls: list[Mapping[str, Any]] | None = None,
        output_text: str | None = None,
    ) -> D:
        """Settle a model call with its real usage and the tool calls the model asked for.

        Answers `{"decision": "CONTINUE"}`; raises TaskStopped on STOP (e.g. repeated_output).
        Always recorded by the server, even on a stopped task: the money was spent.
        """
        body = _drop_none(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            tool_calls=[_model_tool_call(c) for c in tool_calls] if tool_calls else None,
            output_text=output_text,
        )
        path = _path("tasks", task_id, "model-calls", model_call, "usage")
        return self._send(
            _Call("report_usage", "POST", path, body, task_id=task_id, stop_raises=True)
        )

    def request_tool(
        self,
        task_id: str,
        tool: str,
        args: Mapping[str, Any],
        *,
        effect: str = "read",
        operation_key: str | None = None,
        job_id: str | None = None,
        call_id: str | None = None,
        model_call: int | None = None,
    ) -> D:
        """Ask before a tool execution: EXECUTE, REUSE, BLOCK or WAIT is returned as is.

        `job_id` marks a status poll of that job. Raises TaskStopped on STOP.
        """
        body = _drop_none(
            tool=tool,
            args=dict(args),
            effect=effect,
            operation_key=operation_key,
            job_id=job_id,
            call_id=call_id,
            model_call=model_call,
        )
        path = _path("tasks", task_id, "tool-calls")
        return self._send(
            _Call("request_tool", "POST", path, body, task_id=task_id, stop_raises=True)
        )

    def report_result(self, task_id: str, tool_call: int, kind: str, **fields: Any) -> D:
        """Report an EXECUTE'd call's result: kind plus code, data, data_hash, wait_ms, job_id,
        attempts, duration_ms, error, evidence. `{"decision": "CONTINUE", "wait_ms"?}`;
        raises TaskStopped on STOP (also when the result itself stopped the task, even
        COMPLETED by `evidence.done`).
        """
        body = {"kind": kind, **_drop_none(**fields)}
        path = _path("tasks", task_id, "tool-calls", tool_call, "result")
        return self._send(
            _Call("report_result", "POST", path, body, task_id=task_id, stop_raises=True)
        )

    def finish(
        self, task_id: str, *, evidence: Mapping[str, Any] | None = None, answer: str | None = None
    ) -> D:
        """Declare the task done; COMPLETED only with `evidence.done`. Returns the task."""
        body = _drop_none(evidence=dict(evidence) if evidence else None, answer=answer)
        path = _path("tasks", task_id, "finish")
        return self._send(_Call("finish", "POST", path, body, task_id=task_id))

    def stop(self, task_id: str, *, reason: str | None = None, request_id: str | None = None) -> D:
        """Stop the task (agent_stop or operator_stop by token; idempotent). Returns the task."""
        body = _drop_none(reason=reason, request_id=request_id)
        return self._send(_Call("stop", "POST", _path("tasks", task_id, "stop"), body))

    # operator endpoints

    def resume(self, task_id: str, *, reason: str, grant: Mapping[str, Any] | None = None) -> D:
        """Open the next phase, raising limits by `grant`. 409 while an operation is open."""
        body = _drop_none(reason=reason, grant=dict(grant) if grant else None)
        return self._send(_Call("resume", "POST", _path("tasks", task_id, "resume"), body))

    def set_limits(
        self, task_id: str, limits: Mapping[str, Any], *, reason: str | None = None
    ) -> D:
        """Change a task's limits (admin); `reason` goes to the audit log. Returns the task."""
        path = _path("tasks", task_id, "limits")
        body = {**limits, **_drop_none(reason=reason)}
        return self._send(_Call("set_limits", "PATCH", path, body))

    def list_tasks(self, state: str | None = None, agent: str | None = None) -> L:
        """Tasks visible to the token, optionally filtered."""
        params = _drop_none(state=state, agent=agent)
        return self._send(_Call("list_tasks", "GET", "tasks", params=params, items="tasks"))

    def list_operations(self, state: str | None = None) -> L:
        """Ledger operations, optionally filtered by state (e.g. UNKNOWN)."""
        params = _drop_none(state=state)
        call = _Call("list_operations", "GET", "operations", params=params, items="operations")
        return self._send(call)

    def get_operation(self, operation_id: int | str) -> D:
        """One ledger operation."""
        return self._send(_Call("get_operation", "GET", _path("operations", operation_id)))

    def reconcile(
        self,
        operation_id: int | str,
        *,
        verdict: str,
        note: str,
        result: Any = None,
        evidence: Mapping[str, Any] | None = None,
    ) -> D:
        """Settle an UNKNOWN operation: COMMITTED (+ result), NOT_COMMITTED or UNKNOWN."""
        body = _drop_none(verdict=verdict, note=note, result=result, evidence=evidence)
        path = _path("operations", operation_id, "reconcile")
        return self._send(_Call("reconcile", "POST", path, body))

    def pause_agent(self, name: str, reason: str) -> D:
        """The agent-level kill switch: its running tasks stop with agent_paused."""
        path = _path("agents", name, "pause")
        return self._send(_Call("pause_agent", "POST", path, {"reason": reason}))

    def unpause_agent(self, name: str, reason: str) -> D:
        """Lift the agent-level kill switch."""
        path = _path("agents", name, "unpause")
        return self._send(_Call("unpause_agent", "POST", path, {"reason": reason}))


def _model_tool_call(call: Mapping[str, Any]) -> JSON:
    """The `{name, args}` part of a tool call the model asked for, as the usage report wants."""
    return {"name": call["name"], "args": dict(call.get("args") or {})}


class _CallBuilder(_Api[_Call, _Call, _Call]):
    """Hands each call back unsent, for the shared generator logic below."""

    def _send(self, call: _Call) -> _Call:
        return call


_CALLS = _CallBuilder()


def _http_options(base_url: str, token: str, timeout: float) -> JSON:
    return {
        # httpx appends relative paths to the base URL's path only if it ends with "/".
        "base_url": base_url.rstrip("/") + "/",
        "headers": {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        },
        "timeout": timeout,
    }


# -- tool outcomes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolReport:
    """What a tool execution produced, as reported to the result endpoint.

    An `execute` function may return one of these, or plain data (meaning SUCCESS). Evidence
    (`{"revision", "done", "committed"?, "milestone"?}`) must come from the application's
    verifier, never from the model's text.
    """

    kind: str = SUCCESS
    data: Any = None
    evidence: Mapping[str, Any] | None = None
    wait_ms: int | None = None
    job_id: str | None = None
    attempts: int = 1
    code: str | None = None
    error: str | None = None
    data_hash: str | None = None

    def result_fields(self) -> JSON:
        """The result endpoint's fields besides `kind`."""
        return _drop_none(
            data=self.data,
            evidence=dict(self.evidence) if self.evidence is not None else None,
            wait_ms=self.wait_ms,
            job_id=self.job_id,
            attempts=self.attempts,
            code=self.code,
            error=self.error,
            data_hash=self.data_hash,
        )

    def tool_message(self) -> JSON:
        """The tool message for the model; failures are shaped like the BLOCK observation."""
        if self.kind == SUCCESS:
            return {"success": True, "data": self.data}
        default = {
            RETRYABLE: "The tool failed temporarily.",
            PENDING: f"Job {self.job_id} is still running; poll it with job_id.",
            NO_RESULT: "The tool gave no usable result.",
        }.get(self.kind, f"The tool answered {self.kind}.")
        message: JSON = {
            "success": False,
            "code": self.code or self.kind,
            "retryable": self.kind in (RETRYABLE, PENDING),
            "message": self.error or default,
        }
        message.update(_drop_none(data=self.data, job_id=self.job_id, wait_ms=self.wait_ms))
        return message


# -- shared tool logic and its drivers ---------------------------------------------------------


@dataclass(frozen=True)
class _Sleep:
    seconds: float


@dataclass(frozen=True)
class _Invoke:
    """Call application code (execute, inspect, plan); the async driver awaits awaitables."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


T = TypeVar("T")
_Flow = Generator[_Call | _Sleep | _Invoke, Any, T]


def _advance(flow: _Flow[T], reply: Any, error: Exception | None) -> tuple[bool, Any]:
    """Hand the last step's reply, or the exception it raised, back to the flow.

    Returns (False, the flow's next step), or (True, its value) once the flow has returned.
    Both drivers go through here, so they keep the same contract with the flows.
    """
    try:
        return False, (flow.throw(error) if error is not None else flow.send(reply))
    except StopIteration as done:
        return True, done.value


def _drive(flow: _Flow[T], send: Callable[[_Call], Any], sleep: Callable[[float], None]) -> T:
    """Run a flow synchronously; a step's exception is thrown back into the flow."""
    reply: Any = None
    error: Exception | None = None
    while True:
        finished, step = _advance(flow, reply, error)
        if finished:
            return step
        reply, error = None, None
        try:
            if isinstance(step, _Call):
                reply = send(step)
            elif isinstance(step, _Sleep):
                sleep(step.seconds)
            else:
                reply = step.fn(*step.args)
                if _inspect.isawaitable(reply):
                    if asyncio.iscoroutine(reply):
                        reply.close()
                    raise TypeError(f"{step.fn!r} is async: use AsyncTaskSession or arun")
        except Exception as exc:
            error = exc


async def _adrive(
    flow: _Flow[T],
    send: Callable[[_Call], Awaitable[Any]],
    sleep: Callable[[float], Awaitable[None]],
) -> T:
    """Run a flow asynchronously; application code may be sync or async."""
    reply: Any = None
    error: Exception | None = None
    while True:
        finished, step = _advance(flow, reply, error)
        if finished:
            return step
        reply, error = None, None
        try:
            if isinstance(step, _Call):
                reply = await send(step)
            elif isinstance(step, _Sleep):
                await sleep(step.seconds)
            else:
                reply = step.fn(*step.args)
                if _inspect.isawaitable(reply):
                    reply = await reply
        except Exception as exc:
            error = exc


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _tool_flow(
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
) -> _Flow[JSON]:
    """Request, honour WAIT, execute on EXECUTE, report; return the tool message."""
    request = _CALLS.request_tool(
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
        if tries >= max_wait_tries:
            # Another call still holds the write; tell the model instead of waiting forever.
            return {
                "success": False,
                "code": "OPERATION_IN_FLIGHT",
                "retryable": True,
                "message": f"{tool} is still running elsewhere under {operation_key}.",
            }
        yield _Sleep((answer.get("retry_after_ms") or DEFAULT_WAIT_MS) / 1000)
        answer = yield request
        tries += 1

    decision = answer.get("decision")
    if decision == BLOCK:
        return dict(answer.get("observation") or {"success": False, "retryable": False})
    if decision == REUSE:
        return {"success": True, "reused": True, "data": answer.get("result")}
    if decision != EXECUTE:
        raise LoopwardenError(200, "BAD_RESPONSE", f"unexpected decision {decision!r}")

    failure: Exception | None = None
    started = time.monotonic()
    try:
        outcome = yield _Invoke(execute, (args,))
        report = outcome if isinstance(outcome, ToolReport) else ToolReport(data=outcome)
        if inspect is not None and report.kind == SUCCESS and report.evidence is None:
            report = replace(report, evidence=(yield _Invoke(inspect, (report.data,))))
    except Exception as exc:
        # The tool may or may not have acted: NO_RESULT, never a guessed failure or success.
        failure = exc
        report = ToolReport(kind=NO_RESULT, error=_describe(exc))
    duration_ms = int((time.monotonic() - started) * 1000)
    result = _CALLS.report_result(
        task_id,
        int(answer["tool_call"]),
        report.kind,
        duration_ms=duration_ms,
        **report.result_fields(),
    )
    try:
        reply = yield result
    except TaskStopped as stop:
        if failure is not None:
            raise stop from failure
        raise
    if reply.get("wait_ms"):
        yield _Sleep(reply["wait_ms"] / 1000)
    return report.tool_message()
