"""One upstream MCP server, reached over stdio or streamable HTTP, kept alive for the gateway.

Each upstream is one `mcp.Client`, entered and left by a task of its own (an anyio context
must be left by the task that entered it), so a call from any request handler can use it and a
dead upstream can be replaced: after its process died every call on the old client fails, so
the next call starts it again with a new client. Nothing here decides anything: a call either
answers (`CallToolResult`), or raises `UpstreamLost` (it may or may not have acted) or
`UpstreamRefused` (it answered a protocol error, or could not be started to take the call:
nothing ran).
"""

from __future__ import annotations

import logging
import math
import sys
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from loopwarden_client._flows import describe
from loopwarden_client.mcp.config import UpstreamConfig

log = logging.getLogger("loopwarden.mcp")

# JSON-RPC errors that say the request was refused before the tool ran.
REFUSED_CODES = {-32600, -32601, -32602}
TIMEOUT_CODE = -32001
# Starting a server (a process, its imports, the handshake, its tool list) may take longer than
# one call is allowed to.
MIN_START_SECONDS = 30.0


class UpstreamLost(Exception):
    """The call got no usable answer (timeout, crash, garbage): it may or may not have acted."""


class UpstreamRefused(Exception):
    """The call never ran: the upstream refused it with a protocol error (unknown tool, bad
    arguments), or it could not be started to take it."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return describe(exc)


class Upstream:
    """One fronted server. `starting()` (re)starts it; `call()` uses it."""

    def __init__(self, config: UpstreamConfig, task_group: anyio.abc.TaskGroup, timeout: float):
        self.config = config
        self.name = config.name
        self.timeout = timeout
        self._tasks = task_group
        self._client: Client | None = None
        self._closing: anyio.Event | None = None
        self._closed: anyio.Event | None = None
        self._lock = anyio.Lock()
        self.tools: list[types.Tool] = []
        self.error: str | None = None  # why the last start failed
        self._start_ended: anyio.Event | None = None
        self._failed_before = False
        self._checked = False  # the config's tool entries, against its first listing

    def _target(self) -> Any:
        config = self.config
        if config.url is not None:
            if config.headers:
                http = create_mcp_http_client(headers=dict(config.headers))
                return streamable_http_client(config.url, http_client=http)
            return config.url
        assert config.command is not None
        return StdioServerParameters(
            command=config.command, args=list(config.args), env=dict(config.env) or None,
            cwd=config.cwd,
        )  # fmt: skip

    async def _hold(self, *, task_status: anyio.abc.TaskStatus[Client]) -> None:
        """Enter the client, hand it over, and leave it once asked to (or once it broke)."""
        closing, closed = anyio.Event(), anyio.Event()
        self._closing, self._closed = closing, closed
        started = False
        try:
            async with Client(self._target(), read_timeout_seconds=self.timeout) as client:
                started = True
                task_status.started(client)
                await closing.wait()
        except Exception as exc:  # noqa: BLE001 - a broken upstream must never take the gateway down
            if not started:
                raise
            log.warning("upstream %s closed: %s", self.name, _describe(exc))
        finally:
            closed.set()

    def starting(self) -> anyio.Event:
        """Start the upstream unless it runs or is starting; the event is set once that start
        ended (running, or `error` says why not). The start is a task of the gateway's own, so
        whoever stops waiting for it (a listing that answers without it) never cuts it short,
        and one upstream stuck in its handshake holds up nothing but the calls made to it."""
        ended = self._start_ended
        if ended is not None and (self._client is not None or not ended.is_set()):
            return ended  # running (only a start sets the client), or its start not ended
        ended = self._start_ended = anyio.Event()
        self._tasks.start_soon(self._start, ended)
        return ended

    async def _start(self, ended: anyio.Event) -> None:
        bound = max(self.timeout, MIN_START_SECONDS)
        try:
            async with self._lock:
                if self._client is not None:
                    return
                try:
                    with anyio.fail_after(bound):
                        self._client = await self._tasks.start(self._hold)
                        listing = await self._client.list_tools(cache_mode="refresh")
                except Exception as exc:  # noqa: BLE001 - reported as the upstream's error
                    await self._drop()
                    self.error = (
                        f"no answer to the handshake within {_seconds(bound)}"
                        if isinstance(exc, TimeoutError)
                        else _describe(exc)
                    )
                    if self._failed_before:
                        log.warning("%s did not start: %s", self.name, self.error)
                    else:  # the first time on stderr whatever the log level
                        print(f"loopwarden-mcp: {self.name} did not start: {self.error}",
                              file=sys.stderr)  # fmt: skip
                    self._failed_before = True
                    return
                self.tools = list(listing.tools)
                self.error = None
                if not self._checked:
                    self._checked = True
                    self._name_unknown_entries()
        finally:
            ended.set()

    def _name_unknown_entries(self) -> None:
        """A config entry for a tool this server does not list guards nothing (a misspelt
        write's key would derive from all its arguments): said once, on stderr."""
        listed = sorted(tool.name for tool in self.tools)
        for tool in sorted(set(self.config.tools) - set(listed)):
            print(f"loopwarden-mcp: mcpServers.{self.name}.tools.{tool}: {self.name} has no tool "
                  f"{tool!r}, so this entry applies to nothing; its tools: {', '.join(listed)}",
                  file=sys.stderr)  # fmt: skip

    async def _drop(self) -> None:
        self._client = None
        if self._closing is not None:
            self._closing.set()
            assert self._closed is not None
            with anyio.move_on_after(5):
                await self._closed.wait()
        self._closing = self._closed = None

    async def restart_later(self, client: Client) -> None:
        """Forget a client that broke; the next call starts the upstream again."""
        async with self._lock:
            if self._client is client:
                await self._drop()

    async def call(
        self, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> types.CallToolResult:
        await self.starting().wait()  # started (again) if it does not run
        client = self._client
        if client is None:
            # Nothing was sent: a write must not become UNKNOWN for it, only fail.
            raise UpstreamRefused(f"{self.name} is not running, so {tool} was not sent: "
                                  f"{self.error or 'it stopped'}")  # fmt: skip
        try:
            with anyio.fail_after(self.timeout + 1):  # the client's own timeout comes first
                return await client.call_tool(
                    tool,
                    arguments,
                    read_timeout_seconds=self.timeout,
                    meta=meta,  # type: ignore[arg-type]
                )
        except MCPError as exc:
            code = getattr(getattr(exc, "error", None), "code", None)
            if code in REFUSED_CODES:
                raise UpstreamRefused(f"{self.name} refused {tool}: {exc}") from exc
            if code == TIMEOUT_CODE:
                raise UpstreamLost(
                    f"{self.name} gave no answer to {tool} within {_seconds(self.timeout)}"
                ) from exc
            await self.restart_later(client)
            raise UpstreamLost(f"{self.name} failed during {tool}: {exc}") from exc
        except TimeoutError as exc:
            raise UpstreamLost(
                f"{self.name} gave no answer to {tool} within {_seconds(self.timeout)}"
            ) from exc
        except Exception as exc:  # noqa: BLE001 - crash, closed pipe, an answer that is not MCP
            await self.restart_later(client)
            raise UpstreamLost(f"{self.name} failed during {tool}: {_describe(exc)}") from exc

    async def aclose(self) -> None:
        with anyio.move_on_after(5):  # a start still in its handshake is cancelled with the group
            async with self._lock:
                await self._drop()


def _seconds(value: float) -> str:
    return f"{value:g} s" if math.isfinite(value) else "ever"
