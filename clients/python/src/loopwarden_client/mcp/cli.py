"""The `loopwarden-mcp` command: serve the gateway over stdio (desktop and IDE clients launch
it) or streamable HTTP (`--http 127.0.0.1:8765`, at `/mcp`).

    loopwarden-mcp --config ~/.config/loopwarden/mcp.json
    loopwarden-mcp --config mcp.json --http 127.0.0.1:8765

A start-up error (the config, the token, Loopwarden unreachable, the port taken) is one line
on stderr that says what to fix, and exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import uuid
from collections.abc import Sequence

import anyio
import httpx
import uvicorn
from mcp.server.stdio import stdio_server

from loopwarden_client._core import http_options
from loopwarden_client.mcp.config import ConfigError, GatewayConfig, load_config
from loopwarden_client.mcp.gateway import Gateway

CONFIG_ENV = "LOOPWARDEN_MCP_CONFIG"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="loopwarden-mcp",
        description="An MCP server that guards the tools of other MCP servers with Loopwarden.",
    )
    parser.add_argument(
        "--config", default=os.environ.get(CONFIG_ENV),
        help=f"the gateway's JSON config (default: ${CONFIG_ENV})",
    )  # fmt: skip
    parser.add_argument(
        "--http", metavar="[HOST:]PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )  # fmt: skip
    options = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=os.environ.get("LOG_LEVEL", "WARNING").upper(),
        format="loopwarden-mcp: %(levelname)s %(message)s",
    )  # fmt: skip
    try:
        if not options.config:
            raise ConfigError(f"no config: pass --config FILE or set {CONFIG_ENV}")
        config = load_config(options.config)
        address = _address(options.http) if options.http else None
        check_loopwarden(config)
        if address is not None:
            _check_port(*address)
    except ConfigError as exc:
        print(f"loopwarden-mcp: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    gateway = Gateway(config)
    if address is None:
        anyio.run(serve_stdio, gateway)
    else:
        serve_http(gateway, *address)


def check_loopwarden(config: GatewayConfig) -> None:
    """Ask Loopwarden once before serving: unreachable, or the token refused, is a start-up
    error, not a failure of the agent's first tool call."""
    options = http_options(config.url, config.token, min(config.api_timeout_seconds, 10.0))
    try:
        with httpx.Client(**options) as http:
            answer = http.get(f"tasks/{uuid.uuid4()}")
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"cannot reach Loopwarden at {config.url} ({type(exc).__name__}): start it, or set "
            'LOOPWARDEN_URL or "url" under "loopwarden"'
        ) from None
    if answer.status_code in (401, 403):
        raise ConfigError(
            f"Loopwarden at {config.url} refused the agent token ({answer.status_code}): set "
            "LOOPWARDEN_TOKEN to an agent's token (`manage.py create_agent NAME` prints one)"
        )


def _address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 < number < 65536:
        raise ConfigError(f"--http {value!r}: give [HOST:]PORT, e.g. 127.0.0.1:8765")
    return host or "127.0.0.1", number


def _check_port(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ConfigError(
                f"cannot listen on {host}:{port} ({exc.strerror}): choose another --http port"
            ) from None


async def serve_stdio(gateway: Gateway) -> None:
    """Serve until the client closes stdin, or stops the process with SIGTERM or SIGINT: either
    way the session's task is finished first."""
    server = gateway.server
    async with anyio.create_task_group() as serving:
        serving.start_soon(_finish_on_signal, gateway)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        serving.cancel_scope.cancel()


async def _finish_on_signal(gateway: Gateway) -> None:
    """The stdin reader is a thread that no cancellation interrupts, so a signal while stdin is
    still open cannot end the server cleanly: the tasks are finished, then the process exits
    (its upstreams read the end of their stdin and exit too)."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            with anyio.move_on_after(10):
                await gateway.finish_sessions()
            os._exit(0)


def serve_http(gateway: Gateway, host: str, port: int) -> None:
    app = gateway.server.streamable_http_app(host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")


if __name__ == "__main__":
    main()
