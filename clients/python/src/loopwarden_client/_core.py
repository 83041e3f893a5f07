"""The client without I/O, part one: every endpoint as a request, and the reading of answers.

`Client` and `AsyncClient` (in `client.py`) are thin shells over this module and `_flows`, the
way httpx keeps one sans-I/O core under its sync and async clients. Every endpoint is written
once in `Api`, generic in what sending returns; `REQUESTS` hands each request back unsent, for
the flows. Nothing here is public API: import from `loopwarden_client`.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from loopwarden_client._version import VERSION
from loopwarden_client.errors import LoopwardenError, TaskStopped
from loopwarden_client.types import JSON, STOP, check_evidence, drop_none, whole

# Called with (endpoint name, request body, response body) for every answer carrying a decision.
DecisionHook = Callable[[str, JSON, JSON], None]

# Seconds the client waits on the server: longer than the server's own longest wait (the
# embedded database's lock wait, 20 s, after which it answers 503 with Retry-After), so an
# answer is heard rather than the request abandoned while the server still works on it.
DEFAULT_TIMEOUT_SECONDS = 30.0
USER_AGENT = f"loopwarden-client/{VERSION}"


# -- requests and answers ----------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One API request, not yet sent, and how to read its answer."""

    name: str  # the client method that built it; handed to the decision hook
    method: str
    path: str  # relative to the base URL
    body: JSON | None = None
    params: dict[str, str] | None = None
    task_id: str | None = None
    stop_raises: bool = False  # a guard endpoint: STOP becomes TaskStopped
    # A decision (a gate, a tool request, their reports, a finish): each send of it carries a
    # `request_id` of its own, kept when it is sent again, so a resend whose first answer was
    # lost is answered that answer and counts nothing (`_retry.RetryPolicy`).
    decision: bool = False
    items: str | None = None  # a list endpoint: the key holding the items, if wrapped
    # A paginated endpoint: the keys whose lists go on in the page its `next` link names; the
    # flow follows every link and answers them concatenated (docs/DESIGN.md: no list silently cut).
    pages: tuple[str, ...] = ()


def _page(size: int | None) -> dict[str, str] | None:
    return None if size is None else {"limit": str(size)}


def api_path(*parts: object) -> str:
    return "/".join(quote(str(part), safe="") for part in parts)


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
    return LoopwardenError(status, f"HTTP_{status}", first_line(response))


def first_line(response: httpx.Response) -> str:
    """One line for an answer without the envelope: a framework's error page (a traceback, an
    HTML page) is the server's to read, not the agent's. An HTML page by its title."""
    text = response.text
    if "html" in response.headers.get("content-type", ""):
        title = re.search(r"<title[^>]*>([^<]*)</title>", text, re.IGNORECASE)
        text = title.group(1) if title else text
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line[:200] or response.reason_phrase


def unwrap_items(body: Any, key: str, status: int) -> list[JSON]:
    """A list endpoint's items, whether answered bare or wrapped (`results` or `<key>`)."""
    if isinstance(body, list):
        return body
    if isinstance(body, dict):
        for wrapper in ("results", key):
            if isinstance(body.get(wrapper), list):
                return body[wrapper]
    raise LoopwardenError(status, "BAD_RESPONSE", f"expected a list of {key}")


def parse_response(
    request: Request, response: httpx.Response, hook: DecisionHook | None = None
) -> Any:
    """Decode an answer: raise on errors, report decisions to `hook`, raise TaskStopped on STOP.

    A redirect (a server deployed for HTTPS asked over plain HTTP) did nothing: it is raised,
    never read as an empty answer, so a stop or a finish that changed nothing never looks done.
    """
    if response.status_code >= 400:
        raise error_from_response(response)
    if 300 <= response.status_code < 400:
        where = response.headers.get("Location") or "another URL"
        raise LoopwardenError(
            response.status_code,
            "REDIRECTED",
            f"the server redirects this request to {where}; nothing was done. "
            "Give the client the base URL it redirects to",
        )
    if not response.content:
        return {}
    try:
        body = response.json()
    except ValueError as exc:
        raise LoopwardenError(response.status_code, "BAD_RESPONSE", "not JSON") from exc
    if request.items is not None:
        return unwrap_items(body, request.items, response.status_code)
    if isinstance(body, dict) and "decision" in body:
        if hook is not None:
            hook(request.name, request.body or {}, body)
        if request.stop_raises and body["decision"] == STOP:
            raise TaskStopped(body.get("report"), task_id=request.task_id)
    return body


def json_body(body: Any) -> bytes:
    """A request's JSON body as UTF-8. A lone surrogate (text cut in the middle of an emoji's
    pair, a file name decoded with surrogateescape) has no UTF-8 form: such a body is sent
    with every non-ASCII character escaped, the JSON form the server reads and, in a tool's
    result, stores encoded: a tool that ran must never be left unreported for its text."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body, separators=(",", ":"), allow_nan=False).encode("ascii")


def bearer(token: str) -> str:
    """The Authorization header of `token`, read as a file holds it (a mounted secret ends with
    a newline): spaces around it are not part of it. A token holding anything but visible
    ASCII is refused here, by position only: httpx's own error quotes the whole header, and
    with it the secret, into tracebacks and logs."""
    token = token.strip()
    bad = next((n for n, char in enumerate(token) if not "!" <= char <= "~"), None)
    if bad is not None or not token:
        where = f"at character {bad + 1}" if bad is not None else "it is empty"
        raise ValueError(f"the token cannot be sent in an HTTP header ({where})")
    return f"Bearer {token}"


def http_options(base_url: str, token: str, timeout: float) -> JSON:
    return {
        # httpx appends relative paths to the base URL's path only if it ends with "/".
        "base_url": base_url.rstrip("/") + "/",
        "headers": {
            "Authorization": bearer(token),
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        },
        "timeout": timeout,
    }


# -- the endpoints, written once ---------------------------------------------------------------

D = TypeVar("D")  # what a call answering a JSON object returns
L = TypeVar("L")  # ... a list of objects
A = TypeVar("A")  # ... any JSON


class Api(Generic[D, L, A]):
    """Every REST endpoint of docs/DESIGN.md section 6. Subclasses decide what `_send` does."""

    def _send(self, request: Request) -> Any:
        raise NotImplementedError

    def _ask(self, name: str, body: JSON, task_id: str, *path: object) -> Any:
        """A question to the guard (POST under the task): its STOP raises TaskStopped."""
        path_ = api_path("tasks", task_id, *path)
        return self._send(
            Request(name, "POST", path_, body, task_id=task_id, stop_raises=True, decision=True)
        )

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
        body = drop_none(
            goal=goal,
            profile=profile,
            limits=dict(limits) if limits is not None else None,
            external_ref=external_ref,
            trigger_key=trigger_key,
        )
        return self._send(Request("create_task", "POST", "tasks", body))

    def get_task(self, task_id: str) -> D:
        """The task: id, state, reason, phase, limits, usage, remaining, revision, report."""
        return self._send(Request("get_task", "GET", api_path("tasks", task_id), task_id=task_id))

    def trace(self, task_id: str, *, page_size: int | None = None) -> A:
        """The task's ordered model calls, tool calls and events, every page of them
        (`page_size`: each request's `limit`)."""
        path = api_path("tasks", task_id, "trace")
        params = _page(page_size)
        return self._send(
            Request("trace", "GET", path, params=params, task_id=task_id, pages=("calls", "events"))
        )

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
        body = drop_none(
            model=model, est_prompt_tokens=est_prompt_tokens, max_output_tokens=max_output_tokens
        )
        return self._ask("gate_model_call", body, task_id, "model-calls")

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
        Always recorded by the server, even on a stopped task: the money was spent. Counts
        given as floats (an estimate divided out) are sent rounded up to whole tokens.
        """
        body = drop_none(
            prompt_tokens=whole(prompt_tokens),
            completion_tokens=whole(completion_tokens),
            tool_calls=[_model_tool_call(c) for c in tool_calls] if tool_calls else None,
            output_text=output_text,
        )
        return self._ask("report_usage", body, task_id, "model-calls", model_call, "usage")

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
        body = drop_none(
            tool=tool,
            args=dict(args),
            effect=effect,
            operation_key=operation_key,
            job_id=job_id,
            call_id=call_id,
            model_call=model_call,
        )
        return self._ask("request_tool", body, task_id, "tool-calls")

    def report_result(self, task_id: str, tool_call: int, kind: str, **fields: Any) -> D:
        """Report an EXECUTE'd call's result: kind plus code, data, data_hash, wait_ms, job_id,
        attempts, duration_ms, error, evidence. `{"decision": "CONTINUE", "wait_ms"?}`;
        raises TaskStopped on STOP (also when the result itself stopped the task, even
        COMPLETED by `evidence.done`; the sessions' `tool` returns in that case instead).
        """
        body = {"kind": kind, **drop_none(**fields)}
        return self._ask("report_result", body, task_id, "tool-calls", tool_call, "result")

    def finish(
        self, task_id: str, *, evidence: Mapping[str, Any] | None = None, answer: str | None = None
    ) -> D:
        """Declare the task done; COMPLETED only with `evidence.done`. Returns the task.
        Malformed evidence raises `InvalidEvidence` (naming the field); nothing is sent."""
        check_evidence(evidence)
        body = drop_none(evidence=dict(evidence) if evidence else None, answer=answer)
        path = api_path("tasks", task_id, "finish")
        return self._send(Request("finish", "POST", path, body, task_id=task_id, decision=True))

    def stop(self, task_id: str, *, reason: str | None = None, request_id: str | None = None) -> D:
        """Stop the task (agent_stop or operator_stop by token; idempotent). Returns the task.
        An operator token must give a `reason` (400 REASON_REQUIRED)."""
        body = drop_none(reason=reason, request_id=request_id)
        return self._send(Request("stop", "POST", api_path("tasks", task_id, "stop"), body))

    # operator endpoints

    def resume(self, task_id: str, *, reason: str, grant: Mapping[str, Any] | None = None) -> D:
        """Open the next phase, raising limits by `grant`. 409 while an operation is open."""
        body = drop_none(reason=reason, grant=dict(grant) if grant else None)
        return self._send(Request("resume", "POST", api_path("tasks", task_id, "resume"), body))

    def set_limits(
        self, task_id: str, limits: Mapping[str, Any], *, reason: str | None = None
    ) -> D:
        """Change a task's limits (admin); `reason` goes to the audit log. Returns the task."""
        path = api_path("tasks", task_id, "limits")
        body = {**limits, **drop_none(reason=reason)}
        return self._send(Request("set_limits", "PATCH", path, body))

    def list_tasks(
        self, state: str | None = None, agent: str | None = None, *, page_size: int | None = None
    ) -> L:
        """Every task visible to the token, optionally filtered, newest first: every page of
        them (`page_size`: each request's `limit`)."""
        params = {**drop_none(state=state, agent=agent), **(_page(page_size) or {})}
        request = Request("list_tasks", "GET", "tasks", params=params, items="tasks",
                          pages=("tasks",))  # fmt: skip
        return self._send(request)

    def list_operations(self, state: str | None = None, *, page_size: int | None = None) -> L:
        """Every ledger operation the token sees, optionally filtered by state (e.g. UNKNOWN):
        every page of them (`page_size`: each request's `limit`)."""
        params = {**drop_none(state=state), **(_page(page_size) or {})}
        request = Request("list_operations", "GET", "operations", params=params,
                          items="operations", pages=("operations",))  # fmt: skip
        return self._send(request)

    def get_operation(self, operation_id: int | str) -> D:
        """One ledger operation."""
        return self._send(Request("get_operation", "GET", api_path("operations", operation_id)))

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
        body = drop_none(verdict=verdict, note=note, result=result, evidence=evidence)
        path = api_path("operations", operation_id, "reconcile")
        return self._send(Request("reconcile", "POST", path, body))

    def pause_agent(self, name: str, reason: str) -> D:
        """The agent-level kill switch: its running tasks stop with agent_paused."""
        path = api_path("agents", name, "pause")
        return self._send(Request("pause_agent", "POST", path, {"reason": reason}))

    def unpause_agent(self, name: str, reason: str) -> D:
        """Lift the agent-level kill switch."""
        path = api_path("agents", name, "unpause")
        return self._send(Request("unpause_agent", "POST", path, {"reason": reason}))


def tool_args(args: Any) -> JSON:
    """A tool call's arguments as an object. Given as the provider's JSON text (OpenAI's
    `function.arguments`) they are read as JSON; anything that is no object goes as
    `{"arguments": ...}`: a paid call's usage is reported, and a plan run, whatever form its
    tool calls came in."""
    args = args or {}
    if isinstance(args, str):
        with contextlib.suppress(ValueError):  # no JSON: sent as the text it is
            args = json.loads(args)
    return dict(args) if isinstance(args, Mapping) else {"arguments": args}


def _model_tool_call(call: Mapping[str, Any]) -> JSON:
    """The `{name, args}` part of a tool call the model asked for, as the usage report wants."""
    return {"name": call["name"], "args": tool_args(call.get("args"))}


class _RequestBuilder(Api[Request, Request, Request]):
    """Hands each request back unsent, for the flows below."""

    def _send(self, request: Request) -> Request:
        return request


REQUESTS = _RequestBuilder()
