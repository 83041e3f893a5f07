"""The gateway: an MCP server that fronts upstream MCP servers and asks Loopwarden before every
`tools/call`, as the framework adapters do (`loopwarden_client.guard.Guard`). It adds no rule:
the server decides, the gateway carries the answer to the MCP client.

- `tools/list` answers the upstream tools, annotations included (named `server__tool` when
  several servers are fronted). The runner API sees every tool as `server.tool`.
- A call is a read or a write: its config entry says, else its `readOnlyHint`, else write
  (MCP's default). A write's operation key derives from the arguments its entry names, else
  from all of them; an upstream idempotency-key argument is filled with that key.
- EXECUTE calls the upstream and reports what it answered: a result (SUCCESS), an `isError`
  result or a call never sent (a protocol refusal, an upstream that cannot be started: a
  failure, RETRYABLE, and for a write the word that nothing committed),
  or nothing usable (timeout, crash, garbage: NO_RESULT, so a write becomes UNKNOWN and is
  never sent again). REUSE answers the stored result, BLOCK the guard's nudge, a WAIT past
  its bound a retry hint, STOP the report's reason and code, all as `isError` results except
  REUSE. Every answer carries `_meta["loopwarden/decision"]` and `_meta["loopwarden/task"]`.
- One task per client session, created at its first call and finished when it ends
  (PARTIAL/goal_unverified: the gateway has no verifier), or the task a call names in
  `_meta["loopwarden/task"]`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from loopwarden_client._version import VERSION
from loopwarden_client.client import AsyncClient, AsyncTaskSession
from loopwarden_client.errors import LoopwardenError, TaskStopped
from loopwarden_client.guard import Guard, InvalidArguments, ToolSpec, stop_text
from loopwarden_client.mcp.config import GatewayConfig, ToolRule
from loopwarden_client.mcp.upstream import Upstream, UpstreamLost, UpstreamRefused
from loopwarden_client.types import (
    BLOCK,
    EXECUTE,
    INVALID,
    READ,
    RETRYABLE,
    REUSE,
    STOP,
    WAIT,
    WRITE,
    ToolReport,
)

log = logging.getLogger("loopwarden.mcp")

DECISION_META = "loopwarden/decision"
TASK_META = "loopwarden/task"
REPORT_META = "loopwarden/report"
# The MCP SDK's own keys in `_meta` (protocol version, client info...) stay on their hop.
SDK_META_PREFIX = "io.modelcontextprotocol/"
# Upstream arguments taken to be an idempotency key when the config names none.
IDEMPOTENCY_ARGUMENTS = ("idempotency_key", "idempotencyKey", "idempotency-key")
SEPARATOR = "__"  # between a server's name and its tool's, when several servers are fronted
MAX_KEY = 300  # the runner API's longest operation key
# How long upstreams still starting are waited for: by the gateway's own start (so the first
# listing has them) and a call of a tool not yet listed; and by any other listing, which
# answers without them after that (clients give up on a request after a while, 60 s in the
# TypeScript SDK).
START_WAIT = 20.0
LIST_WAIT = 5.0


@dataclass(frozen=True)
class Route:
    """Where an exposed tool goes and how the guard sees it."""

    upstream: Upstream
    tool: types.Tool

    @property
    def api_name(self) -> str:
        return f"{self.upstream.name}.{self.tool.name}"

    def rule(self) -> ToolRule:
        return self.upstream.config.tools.get(self.tool.name) or ToolRule()

    def effect(self) -> str:
        """Config entry, else the tool's annotations, else write (MCP: not read-only)."""
        rule = self.rule()
        if rule.effect is not None:
            return rule.effect
        annotations = self.tool.annotations
        if annotations is not None and annotations.read_only_hint:
            return READ
        return WRITE

    def key_argument(self) -> str | None:
        rule = self.rule()
        if rule.key_argument:
            return rule.key_argument
        properties = (self.tool.input_schema or {}).get("properties") or {}
        return next((name for name in IDEMPOTENCY_ARGUMENTS if name in properties), None)

    def spec(self) -> ToolSpec:
        if self.effect() == READ:
            return ToolSpec(READ)
        return ToolSpec(WRITE, key=self.operation_key)

    def operation_key(self, args: Mapping[str, Any]) -> str:
        """`server.tool:` and the named arguments (all but the idempotency argument when the
        config names none); a hash of them when they are long. A missing argument raises
        KeyError: the model's mistake, answered as INVALID_TOOL_ARGUMENTS."""
        names = self.rule().key
        skip = self.key_argument()
        chosen = {n: args[n] for n in names} if names else {
            n: v for n, v in args.items() if n != skip
        }  # fmt: skip
        text = json.dumps(chosen, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        if names:
            readable = f"{self.api_name}:" + "&".join(
                f"{n}={json.dumps(chosen[n], sort_keys=True, ensure_ascii=True)}" for n in names
            )
            if len(readable) <= MAX_KEY:
                return readable
        return f"{self.api_name}:sha256:{hashlib.sha256(text.encode()).hexdigest()}"


class SessionTask:
    """The task one client session's calls go to, and its guard."""

    def __init__(self, task_id: str, guard: Guard, *, owned: bool):
        self.task_id = task_id
        self.guard = guard
        self.owned = owned  # created by the gateway: finished when the session ends


class Gateway:
    """The guarded MCP server. `server` is the low-level `mcp.server.Server` to run."""

    def __init__(self, config: GatewayConfig, *, transport: Any = None):
        self.config = config
        self._transport = transport
        self.api: AsyncClient | None = None
        self.upstreams: list[Upstream] = []
        self.routes: dict[str, Route] = {}
        self._sessions: dict[str | None, SessionTask] = {}
        self._named: dict[str, SessionTask] = {}
        self._session_lock = anyio.Lock()
        self.server: Server[Any] = Server(
            "loopwarden-mcp",
            version=VERSION,
            instructions="Tools of the fronted MCP servers, each call guarded by Loopwarden.",
            lifespan=self._lifespan,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )

    # -- lifetime

    @asynccontextmanager
    async def _lifespan(self, _server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        self.api = AsyncClient(
            self.config.url, self.config.token, transport=self._transport,
            timeout=self.config.api_timeout_seconds,
        )  # fmt: skip
        try:
            async with anyio.create_task_group() as tasks:
                self.upstreams = [
                    Upstream(upstream, tasks, self.config.call_timeout_seconds)
                    for upstream in self.config.upstreams
                ]
                # The client's handshake is answered without the stragglers: listed once up.
                await self.refresh_routes(START_WAIT)
                try:
                    yield {}
                finally:
                    with anyio.CancelScope(shield=True):
                        await self.finish_sessions()
                        for upstream in self.upstreams:
                            await upstream.aclose()
                    tasks.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self.api.aclose()

    async def finish_sessions(self) -> None:
        """Finish the tasks the gateway created (PARTIAL/goal_unverified: nothing verified)."""
        owned = [task for task in self._sessions.values() if task.owned]
        self._sessions.clear()
        for task in owned:
            await self._finish(task)

    async def _finish(self, task: SessionTask) -> None:
        assert self.api is not None
        try:
            await self.api.finish(task.task_id)
        except (LoopwardenError, httpx.HTTPError) as exc:
            log.warning("could not finish task %s: %s", task.task_id, exc)

    # -- tools/list

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        await self.refresh_routes(LIST_WAIT)
        return types.ListToolsResult(
            tools=[
                route.tool.model_copy(update={"name": name}) for name, route in self.routes.items()
            ]
        )

    async def refresh_routes(self, wait: float) -> None:
        """The routes of every upstream's tools; one that does not run is started again and
        waited for `wait` seconds at most (all at once), else listed as it last was."""
        prefixed = len(self.upstreams) > 1
        with anyio.move_on_after(wait):
            for started in [upstream.starting() for upstream in self.upstreams]:
                await started.wait()
        routes: dict[str, Route] = {}
        for upstream in self.upstreams:
            for tool in upstream.tools:
                name = f"{upstream.name}{SEPARATOR}{tool.name}" if prefixed else tool.name
                routes[name] = Route(upstream, tool)
        self.routes = routes

    # -- tools/call

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        route = self.routes.get(params.name)
        if route is None:
            await self.refresh_routes(START_WAIT)
            route = self.routes.get(params.name)
        if route is None:
            return _error(f"Unknown tool {params.name!r}: see tools/list.", None, None)
        try:
            task = await self._task_for(ctx)
        except (LoopwardenError, httpx.HTTPError, ValueError) as exc:
            return _error(f"Loopwarden could not open a task, so {params.name} was not run: "
                          f"{exc}", None, None)  # fmt: skip
        return await self.call(task, route, dict(params.arguments or {}), params.meta)

    async def call(
        self, task: SessionTask, route: Route, args: dict[str, Any], meta: Any
    ) -> types.CallToolResult:
        """One guarded call: ask, then do what the decision says."""
        spec = route.spec()
        key_argument = route.key_argument() if spec.effect == WRITE else None
        if key_argument is not None:
            with contextlib.suppress(InvalidArguments):  # Guard.tool answers the model itself
                args[key_argument] = spec.operation_key(args)
        guard = task.guard
        guard.tools[route.api_name] = spec
        answered: list[types.CallToolResult] = []
        forwarded = _forwarded_meta(meta)

        async def execute(arguments: Mapping[str, Any]) -> ToolReport:
            try:
                result = await route.upstream.call(route.tool.name, dict(arguments), forwarded)
            except UpstreamRefused as refused:
                answered.append(_error(str(refused), EXECUTE, task.task_id))
                return self._failure(guard, spec.effect, {"error": str(refused)}, str(refused))
            answered.append(result)
            data = _stored(result)
            if result.is_error:
                return self._failure(guard, spec.effect, data, _text_of(result))
            return ToolReport(data=data)

        try:
            outcome = await guard.arun(guard.tool(route.api_name, args, execute))
        except TaskStopped as stop:
            if answered:  # the upstream ran: its answer, and the stop for what comes next
                return _marked(answered[0], EXECUTE, task.task_id, stop.report)
            cause = stop.__cause__
            text = stop_text(stop.report)
            if isinstance(cause, UpstreamLost):
                text = f"{cause}. {text}"
            return _error(text, STOP, task.task_id, stop.report)
        except (LoopwardenError, httpx.HTTPError) as exc:
            if answered:
                return _marked(answered[0], EXECUTE, task.task_id)
            return _error(f"Loopwarden could not be asked, so {route.api_name} was not run: "
                          f"{exc}", None, task.task_id)  # fmt: skip
        decision = outcome.decision
        if decision == EXECUTE:
            if answered:
                return _marked(answered[0], EXECUTE, task.task_id, outcome.report)
            # NO_RESULT on a read that did not stop the task (cannot happen today): say so.
            return _error(str(outcome.message.get("message")), EXECUTE, task.task_id)
        if decision == REUSE:
            return _reused(outcome.message.get("data"), task.task_id, route.tool)
        if decision in (BLOCK, WAIT, INVALID):
            return _error(json.dumps(outcome.message), decision, task.task_id)
        return _error(f"unexpected decision {decision!r}", decision, task.task_id)

    @staticmethod
    def _failure(guard: Guard, effect: str, data: Any, text: str) -> ToolReport:
        """An upstream's `isError` answer (or protocol refusal): it failed, so the model may try
        again within the retry budget; for a write it is the upstream's word that nothing
        committed, so the key may execute again."""
        evidence = None
        if effect == WRITE:
            revision = guard._revision or 0  # fetched by Guard.tool before any write runs
            evidence = {"revision": revision, "done": False, "committed": False}
        return ToolReport(kind=RETRYABLE, data=data, error=text[:2000] or "isError",
                          wait_ms=1, evidence=evidence)  # fmt: skip

    # -- tasks

    async def _task_for(self, ctx: ServerRequestContext[Any]) -> SessionTask:
        """The call's task: the one its `_meta` names, else its session's (made at first use)."""
        named = _meta_value(ctx.meta, TASK_META)
        async with self._session_lock:
            if named is not None:
                if not isinstance(named, str) or not named:
                    raise ValueError(f"_meta[{TASK_META!r}] must be a task id")
                if named not in self._named:
                    self._named[named] = self._session_task(named, owned=False)
                return self._named[named]
            session_id = _session_id(ctx)
            task = self._sessions.get(session_id)
            if task is None:
                assert self.api is not None
                created = await self.api.create_task(self.config.goal, profile=self.config.profile)
                task = self._session_task(str(created["id"]), owned=True)
                self._sessions[session_id] = task
                if session_id is not None:
                    _on_session_end(ctx, lambda: self._end_session(session_id))
            return task

    def _session_task(self, task_id: str, *, owned: bool) -> SessionTask:
        assert self.api is not None
        session = AsyncTaskSession(self.api, task_id, max_wait_tries=self.config.max_wait_tries)
        return SessionTask(task_id, Guard(session), owned=owned)

    async def _end_session(self, session_id: str) -> None:
        task = self._sessions.pop(session_id, None)
        if task is not None and task.owned:
            await self._finish(task)


# -- answers -----------------------------------------------------------------------------------


def _stored(result: types.CallToolResult) -> dict[str, Any]:
    """What the ledger keeps of an upstream answer, so a REUSE can give it back as it was."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"meta"})


def _text_of(result: types.CallToolResult) -> str:
    return " ".join(
        block.text for block in result.content if isinstance(block, types.TextContent)
    ).strip()


def _meta(decision: str | None, task_id: str | None, report: Any = None) -> dict[str, Any]:
    meta: dict[str, Any] = {DECISION_META: decision, TASK_META: task_id}
    if report is not None:
        meta[REPORT_META] = report
    return meta


def _marked(
    result: types.CallToolResult, decision: str, task_id: str | None, report: Any = None
) -> types.CallToolResult:
    kept = {k: v for k, v in (result.meta or {}).items() if not k.startswith(SDK_META_PREFIX)}
    return result.model_copy(update={"meta": {**kept, **_meta(decision, task_id, report)}})


def _error(
    text: str, decision: str | None, task_id: str | None, report: Any = None
) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=True,
        meta=_meta(decision, task_id, report),
    )


def _reused(stored: Any, task_id: str, tool: types.Tool) -> types.CallToolResult:
    """The stored answer of a committed write. One reconciled by an operator may hold any JSON
    (or none, as one whose answer was too large to store): it is given as text then, and as
    an error for a tool with an output schema when it has no object to conform (a client
    refuses a success without its structured content)."""
    if isinstance(stored, dict) and "content" in stored:
        try:
            result = types.CallToolResult.model_validate(stored)
            return _marked(result, REUSE, task_id)
        except ValueError:
            pass
    text = (
        "This call already committed; no result was recorded (an operator confirmed it, or "
        "its answer was too large to keep)."
        if stored is None
        else json.dumps(stored)
    )
    structured = stored if isinstance(stored, dict) else None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=structured is None and tool.output_schema is not None,
        meta=_meta(REUSE, task_id),
    )


# -- what the MCP SDK hands a handler -----------------------------------------------------------


def _meta_value(meta: Any, key: str) -> Any:
    if meta is None:
        return None
    if isinstance(meta, Mapping):
        return meta.get(key)
    return getattr(meta, key, None)


def _forwarded_meta(meta: Any) -> dict[str, Any] | None:
    """The caller's own `_meta` keys, for the upstream: not the SDK's, not Loopwarden's."""
    if not isinstance(meta, Mapping):
        return None
    kept = {
        k: v for k, v in meta.items()
        if isinstance(k, str) and not k.startswith((SDK_META_PREFIX, "loopwarden/"))
        and k not in ("progress_token", "progressToken")
    }  # fmt: skip
    return kept or None


def _connection(ctx: ServerRequestContext[Any]) -> Any:
    # The SDK keeps the per-connection state (session id, exit stack) on the session's
    # connection; a handler has no public road to it yet.
    return getattr(ctx.session, "_connection", None)


def _session_id(ctx: ServerRequestContext[Any]) -> str | None:
    """The transport's session: streamable HTTP's `Mcp-Session-Id`; None on stdio (the
    gateway process is the session) and on HTTP clients of the session-less 2026 protocol."""
    session_id = getattr(_connection(ctx), "session_id", None)
    return session_id if isinstance(session_id, str) else None


def _on_session_end(ctx: ServerRequestContext[Any], then: Any) -> None:
    stack = getattr(_connection(ctx), "exit_stack", None)
    if stack is not None:
        stack.push_async_callback(then)
