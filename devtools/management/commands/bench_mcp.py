"""`manage.py bench_mcp`: what the MCP gateway (`loopwarden-mcp`) adds to a tool call.

A trivial read-only tool (`devtools/mcp_echo.py`, `echo(n)`) is called by the MCP SDK's client
over stdio, directly and through the gateway (a real `loopwarden-mcp` subprocess fronting the
same tool, asking the app under gunicorn), one client at a time and `--clients` at once (each
its own processes), the kinds alternating in slices. Beside them, the runner API's two round
trips a guarded read costs (tool request and result, through the thin client's
`AsyncTaskSession.tool`, as the gateway sends them). Each call has new arguments and new data,
under a profile whose limits no run reaches, so every call is EXECUTE. It prints the p50/p95
of each and what the gateway adds beyond the two round trips (the target: at most 2 ms at p50,
one client at a time).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser
from loopwarden_client import AsyncClient
from mcp import Client, StdioServerParameters

from devtools.live import gunicorn_server
from devtools.management.commands.bench import (
    ALIAS,
    check_database_url,
    prepare_database,
    server_env,
    use_database,
)

ROOT = Path(__file__).resolve().parents[3]
ECHO = ROOT / "devtools" / "mcp_echo.py"
GATEWAY = Path(sys.executable).parent / "loopwarden-mcp"
PROFILE = "bench-mcp"


class Command(BaseCommand):
    help = "What the MCP gateway adds to a trivial tool call, one client and several at once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--database-url", default=f"sqlite:///{ROOT / 'var' / 'bench_mcp.sqlite3'}",
            help="the app's database (created and migrated if missing)",
        )  # fmt: skip
        parser.add_argument("--calls", type=int, default=400, help="calls per measurement")
        parser.add_argument("--clients", type=int, default=8, help="clients at once")
        parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")

    def handle(self, *args: Any, **options: Any) -> None:
        url = options["database_url"]
        check_database_url(url)
        if not GATEWAY.exists():
            raise CommandError(f"{GATEWAY} is missing: install './clients/python[mcp]'")
        prepare_database(url)
        use_database(url)
        token = prepare_agent()
        calls, clients = options["calls"], options["clients"]
        env = server_env(60, "WARNING")  # persistent connections, as deployed
        with (
            gunicorn_server(database_url=url, workers=options["workers"], env=env) as app,
            tempfile.TemporaryDirectory() as scratch,
        ):
            config = Path(scratch) / "gateway.json"
            config.write_text(json.dumps({
                "loopwarden": {"url": app.api, "goal": "bench_mcp"},
                "mcpServers": {"echo": {"command": sys.executable, "args": [str(ECHO)]}},
            }))  # fmt: skip
            results = anyio.run(measure, app.api, token, config, calls, clients)
        self.report(results, calls, clients, url)

    def report(self, results: dict[str, list[float]], calls: int, clients: int, url: str) -> None:
        out = self.stdout.write
        out(f"bench_mcp: {calls} calls per row, database {url.split('://')[0]}")
        out(f"{'':34}{'p50 ms':>9}{'p95 ms':>9}")
        for name, samples in results.items():
            out(f"{name:34}{pct(samples, 50):9.2f}{pct(samples, 95):9.2f}")
        for label in ("1 client", f"{clients} clients"):
            direct = pct(results[f"direct, {label}"], 50)
            gateway = pct(results[f"gateway, {label}"], 50)
            pair = pct(results[f"runner API pair, {label}"], 50)
            added = gateway - direct
            out(f"{label}: the gateway adds {added:.2f} ms at p50; the two round trips "
                f"{pair:.2f} ms; beyond them {added - pair:+.2f} ms"
                f" (gateway / direct {gateway / direct:.1f}x)")  # fmt: skip


def prepare_agent() -> str:
    """An agent whose profile no run reaches (novelty: each call's new data is progress)."""
    from agents.models import Agent, ApiToken, LimitProfile

    big = 1_000_000
    profile, _ = LimitProfile.objects.using(ALIAS).update_or_create(
        name=PROFILE,
        defaults={"max_tool_requests": big, "max_tool_executions": big, "max_model_calls": big,
                  "deadline_seconds": 86_400, "progress_mode": "novelty"},
    )  # fmt: skip
    agent, _ = Agent.objects.using(ALIAS).update_or_create(
        name="bench-mcp-agent", defaults={"namespace": "bench-mcp", "default_profile": profile}
    )
    raw, key_hash, prefix = ApiToken.generate()
    ApiToken.objects.using(ALIAS).create(agent=agent, key_hash=key_hash, prefix=prefix, name="b")
    return raw


def pct(samples: list[float], q: int) -> float:
    if not samples:
        return float("nan")
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


SLICES = 8  # the kinds alternate in slices, so a machine whose load drifts slows all alike


async def measure(
    api: str, token: str, config: Path, calls: int, clients: int
) -> dict[str, list[float]]:
    direct = StdioServerParameters(command=sys.executable, args=[str(ECHO)])
    gateway = StdioServerParameters(
        command=str(GATEWAY), args=["--config", str(config)], env={"LOOPWARDEN_TOKEN": token}
    )
    openers = {
        "direct": lambda: mcp_caller(direct),
        "runner API pair": lambda: pair_caller(api, token),
        "gateway": lambda: mcp_caller(gateway),
    }
    results: dict[str, list[float]] = {}
    for label, n in (("1 client", 1), (f"{clients} clients", clients)):
        async with AsyncExitStack() as stack:
            callers = {
                kind: [await stack.enter_async_context(open_()) for _ in range(n)]
                for kind, open_ in openers.items()
            }
            per_slice = max(1, calls // (SLICES * n))
            for _ in range(SLICES):
                for kind, group in callers.items():
                    samples = results.setdefault(f"{kind}, {label}", [])
                    await together(group, per_slice, samples)
    return results


async def together(callers: list[Any], count: int, samples: list[float]) -> None:
    """Every caller at once, `count` calls each; each call's latency (ms) into `samples`."""

    async def one(call: Any) -> None:
        for _ in range(count):
            started = time.perf_counter()
            await call()
            samples.append((time.perf_counter() - started) * 1000)

    async with anyio.create_task_group() as group:
        for call in callers:
            group.start_soon(one, call)


def fresh() -> int:
    """New arguments, so new data: every call is EXECUTE and progress under novelty."""
    return time.time_ns()


@asynccontextmanager
async def mcp_caller(params: StdioServerParameters) -> AsyncIterator[Any]:
    async with Client(params, read_timeout_seconds=60) as client:
        await client.list_tools()

        async def call() -> None:
            await client.call_tool("echo", {"n": fresh()})

        for _ in range(5):  # warm up: the gateway's task, its connections
            await call()
        yield call


@asynccontextmanager
async def pair_caller(api: str, token: str) -> AsyncIterator[Any]:
    async with AsyncClient(api, token, timeout=60) as lw:
        task = await lw.create_task("bench_mcp: the runner API's pair", profile=PROFILE)
        session = lw.session(task["id"])

        async def call() -> None:
            await session.tool("echo.echo", {"n": fresh()}, lambda args: {"n": args["n"]})

        for _ in range(5):
            await call()
        yield call
