"""`manage.py bench`: what a guard decision costs, under gunicorn on PostgreSQL.

Not part of the test run. It creates (if missing) and migrates its own database, starts the app
under gunicorn with several workers (the helper the concurrency tests use), and measures over
HTTP, through the thin client, as agents see it:

1. N simulated agents in threads, each looping gate -> usage -> tool request -> result (with
   verified progress; every fourth tool a write claimed in the ledger), a fresh task every 15
   rounds. Decisions per second and p50/p95/p99 latency, per endpoint and overall.
2. The same N threads against a baseline endpoint doing one single-row UPDATE in one
   transaction behind the same authentication (`agents/api/bench.py`), and the ratio.
3. Decision latency on a task with 10 prior trace rows versus one with 5,000. Those rows are
   bulk-inserted through the ORM for speed; the measured decisions are real HTTP requests.
   A decision reads and writes one task row, whatever the trace length, so the ratio should
   be near 1. Measured twice: in evidence mode (the verifier's revision is progress) and in
   novelty mode (every step's data is new; the long task has seen one data hash per step, kept
   in their own table), where the ratio should stay near 1 too (at most 1.1).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import dj_database_url
import httpx
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections, transaction
from django.utils import timezone
from loopwarden_client import Client, LoopwardenError, TaskStopped

from agents import loop_eval
from agents.guard import core
from agents.guard import types as g

ALIAS = "bench"
MODEL = "bench-model"
ROUNDS_PER_TASK = 15  # under the default limits: 20 model calls, 20 executions, 40 requests
DECISIONS = ("gate", "usage", "tool", "result", "finish")
PERCENTILE_HEADS = f"{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
ROOT = Path(__file__).resolve().parents[3]

Samples = dict[str, list[float]]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of `values` (milliseconds in, milliseconds out)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


class Command(BaseCommand):
    help = "Benchmark guard decisions under gunicorn on PostgreSQL against a 1-row baseline."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agents", type=int, default=8, help="concurrent simulated agents")
        parser.add_argument("--seconds", type=float, default=10.0, help="per throughput phase")
        parser.add_argument(
            "--database-url",
            default="postgres://postgres@127.0.0.1:5432/loopwarden_bench",
            help="a PostgreSQL database of its own (created and migrated if missing)",
        )
        parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
        parser.add_argument("--threads", type=int, default=1, help="threads per worker")
        parser.add_argument("--conn-max-age", type=int, default=60, help="DB_CONN_MAX_AGE")
        parser.add_argument("--log-level", default="INFO", help="the server's LOG_LEVEL")
        parser.add_argument("--trace-length", type=int, default=5000, help="the long trace")
        parser.add_argument("--samples", type=int, default=100, help="rounds per trace length")

    def handle(self, *args: Any, **opts: Any) -> None:
        url = opts["database_url"]
        if not url.startswith(("postgres://", "postgresql://")):
            raise CommandError("the bench needs PostgreSQL: --database-url postgres://...")
        if opts["agents"] < 1 or opts["seconds"] <= 0 or opts["samples"] < 1:
            raise CommandError("--agents, --seconds and --samples must be positive")
        self.say(f"database {url}: creating if missing, migrating")
        ensure_database(url)
        migrate(url)
        use_database(url)
        tokens = prepare_agents(opts["agents"])
        opts["load_before"] = os.getloadavg()[0]
        from tests.live import gunicorn_server  # the launcher the concurrency tests use

        # The throttle runs (its cost is part of a decision's) but at a rate no bench reaches.
        env = {"LOOPWARDEN_BENCH": "true", "DB_CONN_MAX_AGE": str(opts["conn_max_age"]),
               "LOG_LEVEL": opts["log_level"], "API_THROTTLE_RATE": "1000000/second"}  # fmt: skip
        with gunicorn_server(database_url=url, workers=opts["workers"], threads=opts["threads"],
                             env=env) as server:  # fmt: skip
            self.say(f"gunicorn at {server.url}: {opts['workers']} workers x "
                     f"{opts['threads']} threads; warming up")  # fmt: skip
            drive_agents(server.api, tokens, 1.0)
            drive_baseline(server.api, tokens, 1.0)
            self.say(f"{opts['agents']} agents for {opts['seconds']:g} s")
            decisions = drive_agents(server.api, tokens, opts["seconds"])
            self.say(f"baseline, {opts['agents']} threads for {opts['seconds']:g} s")
            baseline = drive_baseline(server.api, tokens, opts["seconds"])
            self.say(f"trace length 10 vs {opts['trace_length']}, {opts['samples']} rounds each")
            short, long, one_by_one = trace_latency(server.api, tokens[0], opts["trace_length"],
                                                    opts["samples"])  # fmt: skip
            self.say("the same in novelty mode")
            novelty = trace_latency(server.api, tokens[0], opts["trace_length"], opts["samples"],
                                    novelty=True)  # fmt: skip
        opts["load_after"] = os.getloadavg()[0]
        self.report(opts, decisions, baseline, short, long, one_by_one)
        self.report_novelty(opts, *novelty)
        self.report_similarity()

    def report_similarity(self) -> None:
        """Near-duplicate check (lexical) on vs off: CPU only, it adds no SQL statement."""
        off = loop_eval.core_latency(None)
        on = loop_eval.core_latency(0.5)
        self.stdout.write("tool-request decision in the guard core, window of 8 calls of the tool:")
        self.stdout.write(f"  without a threshold {off:7.1f} us; with 0.50 (lexical) {on:7.1f} us "
                          f"(x{on / off:.2f})")  # fmt: skip

    def say(self, text: str) -> None:
        self.stderr.write(f"bench: {text}")

    def report(
        self,
        opts: dict[str, Any],
        decisions: Run,
        baseline: Run,
        short: Samples,
        long: Samples,
        one_by_one: list[float],
    ) -> None:
        out = self.stdout.write
        out("")
        out(f"Loopwarden bench: PostgreSQL, gunicorn {opts['workers']} workers x "
            f"{opts['threads']} threads, DB_CONN_MAX_AGE={opts['conn_max_age']}, "
            f"LOG_LEVEL={opts['log_level']}, {os.cpu_count()} CPUs")  # fmt: skip
        out(f"machine load (1-min average, other processes included): "
            f"{opts['load_before']:.2f} before, {opts['load_after']:.2f} after")  # fmt: skip
        out(f"throughput: {opts['agents']} concurrent clients, {opts['seconds']:g} s per phase")
        out("")
        head = f"{'workload':<30}{'requests':>10}{'per s':>10}{PERCENTILE_HEADS}"
        out(head)
        out("-" * len(head))
        every = [ms for name in DECISIONS for ms in decisions.samples.get(name, [])]
        out(row("guard decisions (all)", every, decisions.seconds))
        for name in DECISIONS:
            if decisions.samples.get(name):
                out(row(f"  {name}", decisions.samples[name], decisions.seconds))
        base = baseline.samples["baseline"]
        out(row("baseline: 1-row UPDATE", base, baseline.seconds))
        rate = len(every) / decisions.seconds
        base_rate = len(base) / baseline.seconds
        out(ratio_row("decisions / baseline", every, base, f"{rate / base_rate:>10.2f}"))
        errors = decisions.errors + baseline.errors
        out(f"errors: {errors}   unexpected stops: {decisions.stops}   "
            f"tasks: {decisions.tasks}")  # fmt: skip
        out("")
        out("latency one request at a time (one client, no queueing), interleaved:")
        head = f"{'workload':<30}{'requests':>10}{'':>10}{PERCENTILE_HEADS}"
        out(head)
        out("-" * len(head))
        short_all = [ms for values in short.values() for ms in values]
        long_all = [ms for values in long.values() for ms in values]
        out(row("decisions, 10 prior calls", short_all))
        out(row(f"decisions, {opts['trace_length']} prior calls", long_all))
        out(row("baseline: 1-row UPDATE", one_by_one))
        out(ratio_row(f"{opts['trace_length']} / 10 prior calls", long_all, short_all))
        out(ratio_row("decisions (10) / baseline", short_all, one_by_one))
        for name in ("gate", "usage", "tool", "result"):
            ratio = percentile(long[name], 50) / percentile(short[name], 50)
            out(f"  {name:<28}p50 {percentile(short[name], 50):6.2f} -> "
                f"{percentile(long[name], 50):6.2f} ms  (x{ratio:.2f})")  # fmt: skip

    def report_novelty(
        self, opts: dict[str, Any], short: Samples, long: Samples, one_by_one: list[float]
    ) -> None:
        out = self.stdout.write
        out("")
        out("novelty progress mode (no evidence; new data is progress), one request at a time:")
        head = f"{'workload':<30}{'requests':>10}{'':>10}{PERCENTILE_HEADS}"
        out(head)
        out("-" * len(head))
        short_all = [ms for values in short.values() for ms in values]
        long_all = [ms for values in long.values() for ms in values]
        out(row("decisions, 10 prior calls", short_all))
        out(row(f"decisions, {opts['trace_length']} prior calls", long_all))
        out(ratio_row(f"{opts['trace_length']} / 10 prior calls", long_all, short_all))
        for name in ("gate", "usage", "tool", "result"):
            ratio = percentile(long[name], 50) / percentile(short[name], 50)
            out(f"  {name:<28}p50 {percentile(short[name], 50):6.2f} -> "
                f"{percentile(long[name], 50):6.2f} ms  (x{ratio:.2f})")  # fmt: skip


def ratio_row(label: str, top: list[float], bottom: list[float], rate: str = "") -> str:
    cells = "".join(f"{percentile(top, q) / percentile(bottom, q):>9.2f}" for q in (50, 95, 99))
    return f"{label:<30}{'':>10}{rate or '':>10}{cells}"


def row(label: str, values: list[float], seconds: float | None = None) -> str:
    rate = f"{len(values) / seconds:>10.1f}" if seconds else f"{'':>10}"
    cells = "".join(f"{percentile(values, q):>9.2f}" for q in (50, 95, 99))
    return f"{label:<30}{len(values):>10}{rate}{cells}"


# -- the database ------------------------------------------------------------------------------


def ensure_database(url: str) -> None:
    """CREATE DATABASE if it is missing (outside a transaction, as PostgreSQL requires)."""
    import psycopg
    from psycopg import sql

    config = dj_database_url.parse(url)
    name = config["NAME"]
    params = {"host": config.get("HOST") or "127.0.0.1", "port": config.get("PORT") or 5432,
              "user": config.get("USER") or None, "password": config.get("PASSWORD") or None,
              "dbname": "postgres"}  # fmt: skip
    with psycopg.connect(**params, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def migrate(url: str) -> None:
    env = {**os.environ, "DATABASE_URL": url}
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise CommandError(f"migrate failed:\n{done.stdout}\n{done.stderr}")


def use_database(url: str) -> None:
    """Give this process a connection alias to the bench database, beside its own default."""
    configured = connections.configure_settings({"default": dj_database_url.parse(url)})
    connections.settings[ALIAS] = configured["default"]


def prepare_agents(count: int) -> list[str]:
    """One agent per simulated agent (own namespace), each with a fresh token; a price row."""
    from agents.models import Agent, ApiToken, ModelPrice

    ModelPrice.objects.using(ALIAS).update_or_create(
        model=MODEL,
        defaults={"input_per_million": Decimal("0.50"), "output_per_million": Decimal("1.50")},
    )
    tokens = []
    for n in range(count):
        agent, _ = Agent.objects.using(ALIAS).get_or_create(
            name=f"bench-agent-{n}", defaults={"namespace": f"bench-{n}"}
        )
        raw, key_hash, prefix = ApiToken.generate()
        ApiToken.objects.using(ALIAS).create(
            agent=agent, key_hash=key_hash, prefix=prefix, name="bench"
        )
        tokens.append(raw)
    return tokens


# -- the workloads -----------------------------------------------------------------------------


class Run:
    """Latencies (ms) by endpoint from several threads, and what went wrong."""

    def __init__(self) -> None:
        self.samples: Samples = defaultdict(list)
        self.seconds = 0.0
        self.errors = 0
        self.stops = 0
        self.tasks = 0
        self._lock = threading.Lock()

    def merge(self, samples: Samples, *, errors: int = 0, stops: int = 0, tasks: int = 0) -> None:
        with self._lock:
            for name, values in samples.items():
                self.samples[name].extend(values)
            self.errors += errors
            self.stops += stops
            self.tasks += tasks


def timed(samples: Samples, name: str, call: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    started = time.perf_counter()
    try:
        return call(*args, **kw)
    finally:
        samples[name].append((time.perf_counter() - started) * 1000)


def one_round(
    client: Client, task_id: str, n: int, samples: Samples, *, novelty: bool = False
) -> None:
    """One agent step: gate the model call, settle it, request the tool, report progress.

    With `novelty`, every tool is a read whose result carries new data and no evidence, so
    the guard judges progress by the data hash (the task's profile says `novelty`).
    """
    write = n % 4 == 0 and not novelty
    tool = "post_invoice" if write else "fetch_page"
    args = {"page": n}
    allowed = timed(samples, "gate", client.gate_model_call, task_id, model=MODEL,
                    est_prompt_tokens=800, max_output_tokens=200)  # fmt: skip
    timed(samples, "usage", client.report_usage, task_id, allowed["model_call"],
          prompt_tokens=750, completion_tokens=150,
          tool_calls=[{"name": tool, "args": args}])  # fmt: skip
    answer = timed(samples, "tool", client.request_tool, task_id, tool, args,
                   effect="write" if write else "read",
                   operation_key=f"{task_id}:{n}" if write else None,
                   model_call=allowed["model_call"])  # fmt: skip
    if answer["decision"] != g.EXECUTE:
        raise LoopwardenError(200, "BENCH", f"expected EXECUTE, got {answer['decision']}")
    evidence = {"revision": n, "done": False, **({"committed": True} if write else {})}
    timed(samples, "result", client.report_result, task_id, answer["tool_call"], "SUCCESS",
          data=page_data(n), evidence=None if novelty else evidence,
          duration_ms=1)  # fmt: skip


def page_data(n: int) -> dict[str, int]:
    return {"page": n, "rows": 25}


def for_seconds(
    worker: Callable[[str, float, Run], None], tokens: list[str], seconds: float
) -> Run:
    """Run `worker(token, stop_at, run)` on one thread per token until `seconds` have passed
    (each worker stops starting work at `stop_at`); `run.seconds` is the time they all took."""
    run = Run()
    started = time.monotonic()
    stop_at = started + seconds
    threads = [threading.Thread(target=worker, args=(t, stop_at, run)) for t in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.seconds = time.monotonic() - started
    return run


def drive_agents(api: str, tokens: list[str], seconds: float) -> Run:
    def agent(token: str, stop_at: float, run: Run) -> None:
        samples: Samples = defaultdict(list)
        errors = stops = tasks = 0
        with Client(api, token, timeout=60) as client:
            while time.monotonic() < stop_at:
                task_id = client.create_task("bench: export every invoice")["id"]
                tasks += 1
                try:
                    for n in range(1, ROUNDS_PER_TASK + 1):
                        if time.monotonic() >= stop_at:
                            client.stop(task_id, reason="bench over")
                            break
                        one_round(client, task_id, n, samples)
                    else:
                        timed(samples, "finish", client.finish, task_id,
                              evidence={"revision": ROUNDS_PER_TASK, "done": True})  # fmt: skip
                except TaskStopped:
                    stops += 1
                except (LoopwardenError, httpx.HTTPError):
                    errors += 1
        run.merge(samples, errors=errors, stops=stops, tasks=tasks)

    return for_seconds(agent, tokens, seconds)


def drive_baseline(api: str, tokens: list[str], seconds: float) -> Run:
    def caller(token: str, stop_at: float, run: Run) -> None:
        samples: Samples = defaultdict(list)
        errors = 0
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=api, headers=headers, timeout=60) as http:
            while time.monotonic() < stop_at:
                response = timed(samples, "baseline", http.post, "_bench/baseline")
                errors += response.status_code != 200
        run.merge(samples, errors=errors)

    return for_seconds(caller, tokens, seconds)


# -- trace length ------------------------------------------------------------------------------


def grow_trace(task_id: str, length: int, headroom: int, *, novelty: bool = False) -> None:
    """Give a task `length` prior trace rows (model and tool calls alternating, every step with
    verified progress), with counters to match and limits raised by `headroom` rounds.

    With `novelty`, the task's progress mode is novelty and every step's data hash is already
    seen (one row per step), the state a long novelty task really reaches."""
    from agents.guard.fingerprint import data_hash
    from agents.models import ModelCall, SeenHash, Task, ToolCall

    now = timezone.now()
    with transaction.atomic(using=ALIAS):
        task = Task.objects.using(ALIAS).select_for_update().get(pk=task_id)
        model_rows, tool_rows = [], []
        for seq in range(1, length + 1):
            step = (seq + 1) // 2
            if seq % 2:
                model_rows.append(ModelCall(
                    task=task, seq=seq, phase=1, round=step, model=MODEL, decision=g.ALLOW,
                    est_prompt_tokens=800, max_output_tokens=200, reserved_cost=Decimal(0),
                    prompt_tokens=750, completion_tokens=150, cost=Decimal("0.0006"),
                    tool_calls=[{"name": "fetch_page", "args": {"page": step}}], settled_at=now,
                ))  # fmt: skip
            else:
                fingerprint, args_text = core.fingerprint("fetch_page", {"page": step}, [])
                tool_rows.append(ToolCall(
                    task=task, seq=seq, phase=1, tool="fetch_page", args={"page": step},
                    effect=g.READ, fingerprint=fingerprint, args_text=args_text,
                    decision=g.EXECUTE, result_kind="SUCCESS", result_data=page_data(step),
                    evidence=None if novelty else {"revision": step, "done": False},
                    result_decision=g.CONTINUE, revision_after=0 if novelty else step,
                    duration_ms=1, reported_at=now,
                ))  # fmt: skip
        ModelCall.objects.using(ALIAS).bulk_create(model_rows, batch_size=1000)
        ToolCall.objects.using(ALIAS).bulk_create(tool_rows, batch_size=1000)
        steps = len(tool_rows)
        if novelty:
            SeenHash.objects.using(ALIAS).bulk_create(
                [SeenHash(task=task, hash=data_hash(page_data(n))) for n in range(1, steps + 1)],
                batch_size=1000,
            )
        task.trace_seq = length
        task.model_calls = len(model_rows)
        task.tool_requests = task.tool_executions = steps
        task.revision = 0 if novelty else steps
        task.tokens_used = 900 * len(model_rows)
        task.cost_spent = Decimal("0.0006") * len(model_rows)
        budget = length + 4 * headroom
        task.limits = {**task.limits, "max_model_calls": budget, "max_tool_requests": budget,
                       "max_tool_executions": budget, "max_tokens": 10**12,
                       "max_cost": "100000",
                       "progress_mode": "novelty" if novelty else "evidence"}  # fmt: skip
        task.deadline_at = now + timedelta(hours=1)
        task.save(using=ALIAS)


def trace_latency(
    api: str, token: str, length: int, samples: int, *, novelty: bool = False
) -> tuple[Samples, Samples, list[float]]:
    """Decision latencies on fresh 10-row tasks and on one `length`-row task, and of the
    baseline, interleaved and one at a time (no queueing: the cost of one request).
    `novelty`: the tasks judge progress by data hashes instead of evidence."""
    short: Samples = defaultdict(list)
    long: Samples = defaultdict(list)
    baseline: Samples = defaultdict(list)
    headers = {"Authorization": f"Bearer {token}"}
    with (
        Client(api, token, timeout=60) as client,
        httpx.Client(base_url=api, headers=headers, timeout=60) as http,
    ):
        long_task = client.create_task("bench: a very long task")["id"]
        grow_trace(long_task, length, samples, novelty=novelty)
        short_tasks = []
        for _ in range(samples):
            short_tasks.append(client.create_task("bench: a short task")["id"])
            grow_trace(short_tasks[-1], 10, 1, novelty=novelty)
        warm = client.create_task("bench: warm-up")["id"]
        grow_trace(warm, 10, 5, novelty=novelty)
        for n in range(1, 6):
            one_round(client, warm, 5 + n, defaultdict(list), novelty=novelty)
        for i, short_task in enumerate(short_tasks):
            # The next step of each task: 10 prior rows are 5 rounds, the long task's too.
            one_round(client, short_task, 6, short, novelty=novelty)
            one_round(client, long_task, length // 2 + 1 + i, long, novelty=novelty)
            for _ in range(4):  # as many as one round has decisions
                timed(baseline, "baseline", http.post, "_bench/baseline")
    return short, long, baseline["baseline"]
