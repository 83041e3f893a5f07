"""`manage.py bench`: what a guard decision costs, under gunicorn on PostgreSQL.

Not part of the test run. It creates (if missing) and migrates its own database, starts the app
under gunicorn with several workers (the helper the concurrency tests use), and measures over
HTTP, through the thin client, as agents see it:

1. N simulated agents in threads, each looping gate -> usage -> tool request -> result (with
   verified progress; every fourth tool a write claimed in the ledger), a fresh task every 15
   rounds. Decisions per second and p50/p95/p99 latency, per endpoint and overall.
2. The same N threads against a baseline endpoint doing one single-row UPDATE in one
   transaction behind the same authentication (`devtools/server.py`), and the ratio. The two
   alternate in `--slices` slices (agents carry their tasks across slices), so a machine whose
   speed drifts during the run slows both alike; the ratio of each pair of slices is shown too.
   Beside them, read from /proc (`devtools/cpu.py`), the CPU each request cost in gunicorn's
   processes, in PostgreSQL's and in the bench's own client threads: on a machine whose cores
   all three share, that CPU is what sets the throughput ratio.
3. Decision latency on a task with 10 prior trace rows versus one with 5,000. Those rows are
   bulk-inserted through the ORM for speed; the measured decisions are real HTTP requests.
   A decision reads and writes one task row, whatever the trace length, so the ratio should
   be near 1. Measured twice: in evidence mode (the verifier's revision is progress) and in
   novelty mode (every step's data is new; the long task has seen one data hash per step, kept
   in their own table), where the ratio should stay near 1 too (at most 1.1).
4. A read tool's request with a near-duplicate threshold on its tool policy (lexical) against
   the same request without one, one request at a time, each on a fresh task whose window holds
   30 earlier calls of the tool (varied queries, none of them progress), so the check scores
   every one. Latency and SQL statements of both and their ratio (the acceptance: at most
   1.2x, and no statement more). With `--threshold-only` it runs twice on new workers: cold
   (the windows' texts never embedded) and steady (asked through the API first, as agents
   would have; the `semantic` provider's target there is 1.5x).
5. A tool request plus its result through the thin client on one kept-alive connection, against
   the same pair on a new connection per request (the server is gunicorn with the repository's
   gunicorn.conf.py, as `./dev run` serves).
6. A soak: `--soak-agents` agents for a fixed count of decisions; its p99, then a check that
   every task's counters equal the decisions recorded in its trace (the differential is zero).

7. Growth (`--growth-size`, 200,000 by default; `--growth-only` runs it alone): on a database
   of its own (the bench's name + `_growth`, made afresh), `manage.py bench_growth` seeds a
   history of ended tasks with their trace by bulk inserts (`devtools/growth.py`), a tenth of
   it first, and times the console's pages, the task list API, the jobs, a prune batch and one
   decision at both sizes, in one table of ratios.

Every decision's SQL statements are counted by the server (`StatementCountMiddleware`, on under
the bench only) and printed per decision kind next to its latency. The throughput phase runs
once per `--agents` count (8 and 32 by default). `--database-url sqlite:///...` runs it all on
the embedded default, and the report says which database it measured. `--quick` is a bounded
run (seconds, not minutes) for a machine without CI.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
import httpx
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections, transaction
from django.utils import timezone
from loopwarden_client import Client, LoopwardenError, TaskStopped

from agents.guard import core, terms
from agents.loop_eval import NOW, eval_limits
from devtools.cpu import GROUPS, CpuMeter, Spent
from devtools.live import gunicorn_server

ALIAS = "bench"
MODEL = "bench-model"
ROUNDS_PER_TASK = 15  # under the default limits: 20 model calls, 20 executions, 40 requests
DECISIONS = ("gate", "usage", "tool", "result", "finish")
PERCENTILE_HEADS = f"{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
ROOT = Path(__file__).resolve().parents[3]
STATEMENTS_HEADER = "x-loopwarden-statements"
FLOOR_SAYS = (
    "the floor: the database work every gate needs and nothing else (task lock with the "
    "agent's flags; trace row, task counters, day row), no rule, validation or ORM"
)

Samples = dict[str, list[float]]

# The statement count of the last answer each thread's client received.
_last_answer = threading.local()


class CountingTransport(httpx.HTTPTransport):
    """The thin client's transport, noting the server's statement count of every answer."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        count = response.headers.get(STATEMENTS_HEADER)
        _last_answer.statements = int(count) if count is not None else None
        return response


def bench_client(api: str, token: str, transport: CountingTransport | None = None) -> Client:
    """The thin client as agents use it: one httpx client, connections kept alive (in
    `transport`'s pool when given, else a pool of its own)."""
    return Client(api, token, timeout=60, transport=transport or CountingTransport())


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
        parser.add_argument(
            "--agents",
            default="8,32",
            help="concurrent simulated agents, one throughput phase per count",
        )
        parser.add_argument("--soak-agents", type=int, default=32, help="agents in the soak")
        parser.add_argument(
            "--soak-decisions",
            type=int,
            default=6000,
            help="decisions the soak makes in all (0: no soak)",
        )
        parser.add_argument(
            "--pairs",
            type=int,
            default=50,
            help="tool request + result pairs per keep-alive measure",
        )
        parser.add_argument(
            "--quick",
            action="store_true",
            help="a bounded run: 5 s phases, short traces, a small soak",
        )
        parser.add_argument(
            "--seconds",
            type=float,
            default=10.0,
            help="throughput phase: seconds of decisions, and of the baseline",
        )
        parser.add_argument(
            "--slices",
            type=int,
            default=5,
            help="alternating slices the throughput phase is cut into",
        )
        parser.add_argument(
            "--database-url",
            default="postgres://postgres@127.0.0.1:5432/loopwarden_bench",
            help="a PostgreSQL database of its own (created and migrated if missing), or "
            "sqlite:///path for the embedded default",
        )
        parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes")
        parser.add_argument("--threads", type=int, default=1, help="threads per worker")
        parser.add_argument("--conn-max-age", type=int, default=60, help="DB_CONN_MAX_AGE")
        parser.add_argument("--log-level", default="INFO", help="the server's LOG_LEVEL")
        parser.add_argument("--trace-length", type=int, default=5000, help="the long trace")
        parser.add_argument("--samples", type=int, default=100, help="rounds per trace length")
        parser.add_argument(
            "--growth-size",
            type=int,
            default=200_000,
            help="growth phase: ended tasks of the large history (0: no growth phase), on a "
            "database of its own (the --database-url's name + '_growth', made afresh)",
        )
        parser.add_argument(
            "--growth-only", action="store_true", help="run the growth phase and nothing else"
        )
        parser.add_argument(
            "--threshold-samples",
            type=int,
            default=200,
            help="tool requests with and without a near-duplicate threshold",
        )
        parser.add_argument(
            "--threshold-provider",
            choices=["lexical", "semantic"],
            default="lexical",
            help="the similarity provider of the threshold phase's tool policy (semantic needs "
            "the loopwarden[semantic] extra)",
        )
        parser.add_argument(
            "--threshold-only",
            action="store_true",
            help="run the near-duplicate threshold phase alone",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        url = opts["database_url"]
        sqlite = url.startswith("sqlite:///")
        check_database_url(url)
        try:
            counts = [int(n) for n in str(opts["agents"]).split(",")]
        except ValueError:
            raise CommandError("--agents: counts separated by commas, e.g. 8,32") from None
        if opts["quick"]:
            opts.update(seconds=min(opts["seconds"], 5.0), samples=min(opts["samples"], 10),
                        threshold_samples=min(opts["threshold_samples"], 60),
                        trace_length=min(opts["trace_length"], 500), pairs=min(opts["pairs"], 10),
                        soak_decisions=min(opts["soak_decisions"], 640),
                        growth_size=min(opts["growth_size"], 2000))  # fmt: skip
        if (min(counts) < 1 or opts["seconds"] <= 0 or opts["samples"] < 1
                or opts["threshold_samples"] < 1 or opts["slices"] < 1):  # fmt: skip
            raise CommandError(
                "--agents, --seconds, --slices, --samples and --threshold-samples must be positive"
            )
        if opts["threshold_provider"] == "semantic":
            from agents import semantic

            if not semantic.available():
                raise CommandError(str(semantic.MissingExtra()))
        opts["database"] = "SQLite (the embedded default)" if sqlite else "PostgreSQL"
        if opts["growth_only"]:
            self.growth(url, opts["growth_size"] or 200_000)
            return
        self.say(f"database {url}: creating if missing, migrating")
        prepare_database(url)
        use_database(url)
        tokens = prepare_agents(max([*counts, opts["soak_agents"]]))
        opts["load_before"] = os.getloadavg()[0]
        opts["autovacuum"] = autovacuum_setting()
        env = server_env(opts["conn_max_age"], opts["log_level"])
        if opts["threshold_only"]:
            # Each state on workers started for it, the shared cache (CACHE_URL) cleared of
            # the phase's texts: cold is the first requests of new workers.
            states = {}
            for state in ("cold", "steady"):
                forgotten = forget_vectors()
                with gunicorn_server(database_url=url, workers=opts["workers"],
                                     threads=opts["threads"], env=env) as server:  # fmt: skip
                    self.say(f"near-duplicate threshold on vs off ({opts['threshold_provider']}, "
                             f"{state}), {opts['threshold_samples']} requests each; "
                             f"{forgotten} vectors dropped from the shared cache")  # fmt: skip
                    analyze()
                    states[state] = threshold_latency(
                        server.api, tokens[0], opts["threshold_samples"],
                        opts["threshold_provider"], steady=state == "steady",
                    )  # fmt: skip
            for state, threshold in states.items():
                self.report_threshold(*threshold, provider=opts["threshold_provider"],
                                      state=state)  # fmt: skip
            return
        with gunicorn_server(database_url=url, workers=opts["workers"], threads=opts["threads"],
                             env=env) as server:  # fmt: skip
            self.say(f"gunicorn at {server.url}: {opts['workers']} workers x "
                     f"{opts['threads']} threads; warming up")  # fmt: skip
            drive_agents(server.api, tokens[: counts[0]], 1.0)
            drive_baseline(server.api, tokens[: counts[0]], 1.0)
            drive_floor(server.api, tokens[: counts[0]], 1.0)
            meter = CpuMeter(server.process.pid, database=not sqlite)
            opts["cpu"] = meter
            phases = []
            for count in counts:
                analyze()
                self.say(f"{count} agents and the baseline, {opts['seconds']:g} s each, in "
                         f"{opts['slices']} alternating slices")  # fmt: skip
                decisions, baseline, floor, ratios = interleaved(
                    server.api, tokens[:count], opts["seconds"], opts["slices"], meter
                )
                phases.append((count, decisions, baseline, floor, ratios))
            self.say(f"trace length 10 vs {opts['trace_length']}, {opts['samples']} rounds each")
            short, long, one_by_one = trace_latency(server.api, tokens[0], opts["trace_length"],
                                                    opts["samples"])  # fmt: skip
            self.say("the same in novelty mode")
            novelty = trace_latency(server.api, tokens[0], opts["trace_length"], opts["samples"],
                                    novelty=True)  # fmt: skip
            self.say(f"near-duplicate threshold on vs off, {opts['threshold_samples']} requests "
                     f"each, {WINDOW_CALLS} prior calls in the window")  # fmt: skip
            analyze()
            threshold = threshold_latency(server.api, tokens[0], opts["threshold_samples"],
                                          opts["threshold_provider"])  # fmt: skip
            self.say(f"keep-alive: {opts['pairs']} tool request + result pairs, twice")
            analyze()
            pairs = keepalive_pairs(server.api, tokens[0], opts["pairs"])
            soak = None
            if opts["soak_decisions"] > 0:
                self.say(f"soak: {opts['soak_agents']} agents, {opts['soak_decisions']} decisions")
                analyze()
                soak = drive_soak(server.api, tokens[: opts["soak_agents"]],
                                  opts["soak_decisions"])  # fmt: skip
        opts["load_after"] = os.getloadavg()[0]
        for count, decisions, baseline, floor, ratios in phases:
            opts["agents"] = count
            self.report(opts, decisions, baseline, floor, ratios, short, long, one_by_one)
        self.report_novelty(opts, *novelty)
        self.report_threshold(*threshold, provider=opts["threshold_provider"])
        self.report_pairs(*pairs)
        if soak is not None:
            self.report_soak(opts, soak)
        self.report_similarity()
        if opts["growth_size"] > 0:
            self.growth(url, opts["growth_size"])

    def growth(self, url: str, size: int) -> None:
        """The growth phase (`manage.py bench_growth`), in a process of its own on a database of
        its own: the history it seeds never reaches the other phases' database."""
        growth_url = growth_database(url)
        self.say(f"growth phase: database {growth_url}, made afresh; {size:,} ended tasks")
        prepare_database(growth_url, fresh=True)
        env = {**os.environ, "DATABASE_URL": growth_url, "LOOPWARDEN_DEVTOOLS": "true",
               "LOG_LEVEL": "WARNING"}  # fmt: skip
        done = subprocess.run(
            [sys.executable, "manage.py", "bench_growth", f"--growth-size={size}"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.stdout.write(done.stdout)
        if done.returncode != 0:
            raise CommandError("the growth phase failed (its output is above)")

    def report_similarity(self) -> None:
        """Near-duplicate check (lexical) on vs off: CPU only, it adds no SQL statement."""
        off = core_latency(None)
        on = core_latency(0.5)
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
        floor: Run,
        ratios: list[float],
        short: Samples,
        long: Samples,
        one_by_one: Samples,
    ) -> None:
        out = self.stdout.write
        out("")
        out(f"Loopwarden bench: {opts['database']}, gunicorn {opts['workers']} workers x "
            f"{opts['threads']} threads, DB_CONN_MAX_AGE={opts['conn_max_age']}, "
            f"LOG_LEVEL={opts['log_level']}, {os.cpu_count()} CPUs")  # fmt: skip
        out(f"machine load (1-min average, other processes included): "
            f"{opts['load_before']:.2f} before, {opts['load_after']:.2f} after")  # fmt: skip
        out(f"statistics: ANALYZE before each phase and after each trace is grown, as autovacuum "
            f"would keep them (autovacuum on this server: {opts['autovacuum']})")  # fmt: skip
        out(f"throughput: {opts['agents']} concurrent clients, {opts['seconds']:g} s each for the "
            f"decisions, the baseline and the floor, in {opts['slices']} alternating "
            f"slices")  # fmt: skip
        out(f"  {FLOOR_SAYS}")
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
        least = floor.samples["floor"]
        out(row("floor: a gate's database work", least, floor.seconds))
        rate = decisions.rate(DECISIONS)
        base_rate = baseline.rate(("baseline",))
        floor_rate = floor.rate(("floor",))
        if least and base:
            out(ratio_row("floor / baseline", least, base, f"{floor_rate / base_rate:>10.2f}"))
        if every and least:
            out(ratio_row("decisions / floor", every, least, f"{rate / floor_rate:>10.2f}"))
        if every and base:
            out(ratio_row("decisions / baseline", every, base, f"{rate / base_rate:>10.2f}"))
            ordered = sorted(ratios)
            out(f"  throughput ratio per slice: median {ordered[len(ordered) // 2]:.2f}, "
                f"{ordered[0]:.2f}-{ordered[-1]:.2f} over {len(ordered)} slices"
                f"{slice_error(ratios)}")  # fmt: skip
        if decisions.spread:
            out("kept-alive connections per server worker (each agent's decisions, baseline and "
                f"floor share one): {' '.join(map(str, decisions.spread))}")  # fmt: skip
        errors = decisions.errors + baseline.errors + floor.errors
        out(f"errors: {errors}   unexpected stops: {decisions.stops}   "
            f"tasks: {decisions.tasks}")  # fmt: skip
        out("SQL statements per request, counted by the server (median, min-max):")
        for name in (*DECISIONS, "baseline", "floor"):
            counted = (decisions.samples.get(f"{name}#sql") or baseline.samples.get(f"{name}#sql")
                       or floor.samples.get(f"{name}#sql"))  # fmt: skip
            if counted:
                out(f"  {name:<28}{statements_cell(counted)}")
        meter = opts.get("cpu")
        if meter is not None and meter.available:
            self.report_cpu(opts, meter, decisions, baseline, floor)
        if opts.get("one_by_one_shown"):
            return
        opts["one_by_one_shown"] = True
        out("")
        self.trace_length_table(
            opts, "latency one request at a time (one client, no queueing), interleaved:",
            short, long, one_by_one,
        )  # fmt: skip

    def report_cpu(
        self, opts: dict[str, Any], meter: CpuMeter, decisions: Run, baseline: Run, floor: Run
    ) -> None:
        """CPU per request of each workload by process group, read from /proc, and the
        throughput ratio that CPU alone would allow."""
        out = self.stdout.write
        if opts["database"].startswith("SQLite"):
            where = "SQLite runs inside the server's processes"
        elif meter.database_seen:
            where = "PostgreSQL: every postgres process on this machine"
        else:
            where = "PostgreSQL is not on this machine: not measured"
        out("CPU per request, read from /proc (ms; server: gunicorn's master and workers; "
            f"{where}; clients: the bench's own threads; task creations counted as "
            "requests):")  # fmt: skip
        head = f"{'workload':<30}{'server':>10}{'database':>10}{'clients':>10}{'all':>10}"
        out(f"{head}{'machine busy (stolen)':>25}")
        out("-" * (len(head) + 25))
        per_request = {}
        for label, run, names in (
            ("guard decisions (all)", decisions, DECISIONS),
            ("baseline: 1-row UPDATE", baseline, ("baseline",)),
            ("floor: a gate's database work", floor, ("floor",)),
        ):
            requests = run.requests(names)
            if not requests or not run.cpu.total:
                continue
            cells = [run.cpu.seconds[group] * 1000 / requests for group in GROUPS]
            per_request[label] = [*cells, sum(cells)]
            busy = f"{run.cpu.busy / run.cpu.total:.0%} ({run.cpu.steal / run.cpu.total:.0%})"
            out(f"{label:<30}" + "".join(f"{ms:>10.2f}" for ms in per_request[label])
                + f"{busy:>25}")  # fmt: skip
        mine, base = (
            per_request.get("guard decisions (all)"),
            per_request.get("baseline: 1-row UPDATE"),
        )
        if mine and base:
            out(f"{'decisions / baseline':<30}" + "".join(
                f"{m / b:>10.2f}" if b else f"{'':>10}" for m, b in zip(mine, base, strict=True)
            ))  # fmt: skip
            out(f"  the throughput ratio CPU alone would allow (the baseline's CPU per request "
                f"over the decisions'): {base[-1] / mine[-1]:.2f}")  # fmt: skip

    def trace_length_table(
        self,
        opts: dict[str, Any],
        title: str,
        short: Samples,
        long: Samples,
        one_by_one: Samples | None,
    ) -> None:
        """Decisions at 10 and at `trace_length` prior calls, their ratio per kind, and (when
        given) the baseline beside them."""
        out = self.stdout.write
        out(title)
        head = f"{'workload':<30}{'requests':>10}{'':>10}{PERCENTILE_HEADS}"
        out(head)
        out("-" * len(head))
        short_all = latencies(short)
        long_all = latencies(long)
        out(row("decisions, 10 prior calls", short_all))
        out(row(f"decisions, {opts['trace_length']} prior calls", long_all))
        if one_by_one is not None:
            out(row("baseline: 1-row UPDATE", one_by_one["baseline"]))
            out(row("floor: a gate's database work", one_by_one["floor"]))
        out(ratio_row(f"{opts['trace_length']} / 10 prior calls", long_all, short_all))
        if one_by_one is not None:
            out(ratio_row("floor / baseline", one_by_one["floor"], one_by_one["baseline"]))
            out(ratio_row("decisions (10) / floor", short_all, one_by_one["floor"]))
            out(ratio_row("decisions (10) / baseline", short_all, one_by_one["baseline"]))
        base = percentile(one_by_one["baseline"], 50) if one_by_one is not None else None
        for name in ("gate", "usage", "tool", "result"):
            ratio = percentile(long[name], 50) / percentile(short[name], 50)
            versus = (f";  {percentile(short[name], 50) / base:.2f}x the baseline's p50"
                      if base else "")  # fmt: skip
            out(f"  {name:<28}p50 {percentile(short[name], 50):6.2f} -> "
                f"{percentile(long[name], 50):6.2f} ms  (x{ratio:.2f}){versus}")  # fmt: skip

    def report_novelty(
        self, opts: dict[str, Any], short: Samples, long: Samples, one_by_one: Samples
    ) -> None:
        title = "novelty progress mode (no evidence; new data is progress), one request at a time:"
        self.stdout.write("")
        self.trace_length_table(opts, title, short, long, None)

    def report_threshold(
        self,
        without: Samples,
        with_: Samples,
        not_executed: int,
        probe: dict[str, str],
        provider: str = "lexical",
        state: str = "cold",
    ) -> None:
        """Issue 12: a decision with a threshold stays within 1.2x of one without, and the
        check adds no SQL statement (the window is on the task row it already reads). Issue
        44: with the semantic provider, within 1.5x in the steady state."""
        out = self.stdout.write
        says = {
            "cold": "no worker has embedded the window's texts",
            "steady": "the window's texts asked through the API before, the request's new",
        }
        out("")
        out(f"a read tool's request, near-duplicate threshold {THRESHOLD:.2f} ({provider}) on its "
            f"policy vs none, {WINDOW_CALLS} prior calls of the tool in the window, "
            "one request at a time, interleaved; "
            f"{state} ({says[state]}; shared vector cache: {shared_cache_says()}):")  # fmt: skip
        head = f"{'workload':<30}{'requests':>10}{'':>10}{PERCENTILE_HEADS}"
        out(head)
        out("-" * len(head))
        out(row("without a threshold", without["tool"]))
        out(row(f"with {THRESHOLD:.2f} ({provider})", with_["tool"]))
        out(ratio_row("with / without", with_["tool"], without["tool"]))
        out("SQL statements per request, counted by the server (median, min-max):")
        for label, samples in (("without a threshold", without), ("with a threshold", with_)):
            counted = samples.get("tool#sql")
            out(f"  {label:<28}{statements_cell(counted) if counted else 'not counted'}")
        if not_executed:
            out(f"requests not answered EXECUTE (a near duplicate after all): {not_executed}")
        # The check did run: a rephrased earlier query is BLOCKed with the threshold only.
        out(f"a rephrased earlier query: {probe[TOOL_WITHOUT]} without a threshold, "
            f"{probe[TOOL_WITH]} with it")  # fmt: skip

    def report_pairs(self, kept: list[float], fresh: list[float]) -> None:
        out = self.stdout.write
        out("")
        out("a tool request + its result through the thin client:")
        head = f"{'connection':<30}{'pairs':>10}{'':>10}{PERCENTILE_HEADS}"
        out(head)
        out("-" * len(head))
        out(row("one kept alive", kept))
        out(row("a new one per request", fresh))
        out(ratio_row("kept alive / new", kept, fresh))

    def report_soak(self, opts: dict[str, Any], soak: Soak) -> None:
        out = self.stdout.write
        every = [ms for name in DECISIONS for ms in soak.run.samples.get(name, [])]
        out("")
        out(f"soak: {opts['soak_agents']} agents, {len(every)} decisions in "
            f"{soak.run.seconds:.1f} s ({len(every) / soak.run.seconds:.1f}/s), "
            f"{soak.run.tasks} tasks")  # fmt: skip
        out(row("soak decisions", every, soak.run.seconds))
        out(f"errors: {soak.run.errors}   unexpected stops: {soak.run.stops}   "
            f"counter differential: {len(soak.differences)} tasks")  # fmt: skip
        for line in soak.differences[:10]:
            out(f"  {line}")


def latencies(samples: Samples) -> list[float]:
    """Every latency in `samples` (not the statement counts filed beside them)."""
    return [ms for name, values in samples.items() if "#" not in name for ms in values]


def statements_cell(counted: list[float]) -> str:
    ordered = sorted(int(n) for n in counted)
    return f"{ordered[len(ordered) // 2]:>3}  ({ordered[0]}-{ordered[-1]})"


def ratio_row(label: str, top: list[float], bottom: list[float], rate: str = "") -> str:
    cells = "".join(f"{percentile(top, q) / percentile(bottom, q):>9.2f}" for q in (50, 95, 99))
    return f"{label:<30}{'':>10}{rate or '':>10}{cells}"


def slice_error(ratios: list[float]) -> str:
    """How far the phase's ratio may be from the machine's: the standard error of the slices'
    mean ratio (their standard deviation over the square root of their count), when there are
    slices enough to say."""
    if len(ratios) < 3:
        return ""
    error = statistics.stdev(ratios) / math.sqrt(len(ratios))
    return f"; their mean {statistics.fmean(ratios):.2f}, standard error {error:.2f}"


def row(label: str, values: list[float], seconds: float | None = None) -> str:
    rate = f"{len(values) / seconds:>10.1f}" if seconds else f"{'':>10}"
    cells = "".join(f"{percentile(values, q):>9.2f}" for q in (50, 95, 99))
    return f"{label:<30}{len(values):>10}{rate}{cells}"


def core_latency(threshold: float | None, *, window: int = 8, rounds: int = 2000) -> float:
    """Microseconds per tool-request decision of the core, the window holding `window` earlier
    calls of the same tool (the near-duplicate check's worst case: it scores every one).

    The near-duplicate check adds no SQL statement (the window is on the task row), so its whole
    cost is this CPU time.
    """
    limits = eval_limits(threshold)
    entries = []
    for i in range(window):
        fp, text = core.fingerprint("search", {"q": f"topic {i} quarterly report", "limit": 10}, [])
        entries.append(terms.WindowEntry(fingerprint=fp, tool="search", args=text))
    agent = terms.AgentView()
    started = time.perf_counter()
    for i in range(rounds):
        task = terms.TaskState(
            state=terms.RUNNING, phase=1, limits=limits, deadline_at=NOW + timedelta(hours=1),
            window=list(entries),
        )  # fmt: skip
        req = terms.ToolRequest(tool="search", args={"q": f"new question {i % 50}", "limit": 10})
        core.request_tool(task, req, None, agent, NOW)
    return (time.perf_counter() - started) / rounds * 1e6


# -- the database ------------------------------------------------------------------------------


def check_database_url(url: str) -> None:
    """A --database-url the bench can use: PostgreSQL, or SQLite for the embedded default."""
    if not url.startswith(("postgres://", "postgresql://", "sqlite:///")):
        raise CommandError("--database-url: postgres://... or sqlite:///path")


def prepare_database(url: str, *, fresh: bool = False) -> None:
    """The database created (PostgreSQL, if missing; dropped first when `fresh`) and migrated."""
    if fresh and url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
    elif not url.startswith("sqlite:///"):
        ensure_database(url, fresh=fresh)
    migrate(url)


def growth_database(url: str) -> str:
    """The growth phase's database: the bench's, its name followed by `_growth`."""
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        return f"sqlite:///{path.with_name(path.stem + '_growth' + path.suffix)}"
    parts = urlsplit(url)
    return parts._replace(path=parts.path + "_growth").geturl()


def server_env(conn_max_age: int | str, log_level: str) -> dict[str, str]:
    """The environment of the app the bench measures: the developer tools (the baseline and
    floor endpoints, the statement counts) on, and the throttle running (its cost is part of a
    decision's) at a rate no bench reaches."""
    return {"LOOPWARDEN_DEVTOOLS": "true", "LOOPWARDEN_BENCH": "true",
            "DB_CONN_MAX_AGE": str(conn_max_age), "LOG_LEVEL": log_level,
            "API_THROTTLE_RATE": "1000000/second"}  # fmt: skip


def ensure_database(url: str, *, fresh: bool = False) -> None:
    """CREATE DATABASE if it is missing (outside a transaction, as PostgreSQL requires); with
    `fresh`, DROP it first."""
    import psycopg
    from psycopg import sql

    config = dj_database_url.parse(url)
    name = config["NAME"]
    params = {"host": config.get("HOST") or "127.0.0.1", "port": config.get("PORT") or 5432,
              "user": config.get("USER") or None, "password": config.get("PASSWORD") or None,
              "dbname": "postgres"}  # fmt: skip
    with psycopg.connect(**params, autocommit=True) as conn:
        if fresh:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
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


def analyze() -> None:
    """Gather the bench database's statistics, as autovacuum keeps them on a production server.

    The hot path's statements are prepared, each with one generic plan per connection, chosen
    from the statistics. Without any (a new database on a server with autovacuum off, as on the
    development machine), PostgreSQL planned the lock of a task with one of its calls to read
    all of the task's calls, and kept that plan for the connection's life: the bench measured a
    state no autovacuumed database is in. An ANALYZE invalidates the plans made before it."""
    with connections[ALIAS].cursor() as cursor:
        cursor.execute("ANALYZE")


def autovacuum_setting() -> str:
    """The server's `autovacuum` setting (SQLite has none)."""
    connection = connections[ALIAS]
    if connection.vendor != "postgresql":
        return "none (SQLite)"
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        return str(cursor.fetchone()[0])


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
        self.cpu = Spent()  # where the machine's CPU went meanwhile (`measured`)
        self.spread: list[int] = []  # kept-alive connections per server worker, most first
        self._lock = threading.Lock()

    def merge(self, samples: Samples, *, errors: int = 0, stops: int = 0, tasks: int = 0) -> None:
        with self._lock:
            for name, values in samples.items():
                self.samples[name].extend(values)
            self.errors += errors
            self.stops += stops
            self.tasks += tasks

    def absorb(self, other: Run) -> None:
        """Add another run's samples, counts, time and CPU (one slice of an interleaved
        phase)."""
        self.merge(other.samples, errors=other.errors, stops=other.stops, tasks=other.tasks)
        self.seconds += other.seconds
        self.cpu.absorb(other.cpu)

    def requests(self, names: tuple[str, ...]) -> int:
        """Requests sent to the endpoints `names`, and the task creations among them."""
        return sum(len(self.samples.get(name, [])) for name in names) + self.tasks

    def rate(self, names: tuple[str, ...]) -> float:
        """Requests per second of the endpoints `names`."""
        return sum(len(self.samples.get(name, [])) for name in names) / self.seconds


def timed(samples: Samples, name: str, call: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Call, noting the latency under `name` and the server's statement count under
    `name#sql` (when the answer carried one)."""
    _last_answer.statements = None
    started = time.perf_counter()
    try:
        return call(*args, **kw)
    finally:
        samples[name].append((time.perf_counter() - started) * 1000)
        if getattr(_last_answer, "statements", None) is not None:
            samples[f"{name}#sql"].append(_last_answer.statements)


def one_round(
    client: Client, task_id: str, n: int, samples: Samples, *, novelty: bool = False
) -> None:
    """One agent step: gate the model call, settle it, request the tool, report progress.

    With `novelty`, every tool is a read whose result carries new data and no evidence, so
    the guard judges progress by the data hash (the task's profile says `novelty`).
    """
    write = writes_at(n, novelty=novelty)
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
    if answer["decision"] != terms.EXECUTE:
        raise LoopwardenError(200, "BENCH", f"expected EXECUTE, got {answer['decision']}")
    evidence = {"revision": n, "done": False, **({"committed": True} if write else {})}
    timed(samples, "result", client.report_result, task_id, answer["tool_call"], "SUCCESS",
          data=page_data(n), evidence=None if novelty else evidence,
          duration_ms=1)  # fmt: skip


def writes_at(n: int, *, novelty: bool = False) -> bool:
    """Whether `one_round` step `n` writes (every fourth step, never in novelty mode)."""
    return n % 4 == 0 and not novelty


def trace_steps(length: int, samples: int) -> list[tuple[int, int]]:
    """The step each sample of `trace_latency` takes on a fresh 10-row task and on the
    `length`-row task: the same kind of step on both, a read, so that only the trace length
    differs. (The long task used to take every step after its prior rows, a write every
    fourth: its tool requests and results then paid for ledger rows the short tasks' reads
    never had, and the ratio charged that to the trace length.)"""
    after = (n for n in itertools.count(length // 2 + 1) if not writes_at(n))
    return [(6, next(after)) for _ in range(samples)]


def page_data(n: int) -> dict[str, int]:
    return {"page": n, "rows": 25}


def for_seconds(
    worker: Callable[[str, float, Run], None], tokens: list[str], seconds: float
) -> Run:
    """Run `worker(token, stop_at, run)` on one thread per token until `seconds` have passed
    (each worker stops starting work at `stop_at`); `run.seconds` is the time they all took.
    A worker counts a failed request in `run.errors`; anything else it raises is raised here,
    once every thread has ended, instead of ending its thread with the report none the wiser."""
    run = Run()
    failures: list[BaseException] = []
    started = time.monotonic()
    stop_at = started + seconds

    def guarded(token: str) -> None:
        try:
            worker(token, stop_at, run)
        except BaseException as exc:  # raised again below: no thread ends unseen
            failures.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.seconds = time.monotonic() - started
    if failures:
        raise failures[0]
    return run


class ClientPool:
    """The clients of a sliced phase, one thin client per token, made before its first slice
    and kept across slices, as agents keep theirs: making an httpx client costs about 28 ms of
    CPU (its TLS context), which made afresh for every slice would be charged to the requests
    of that slice (about a millisecond each at 8 agents and 1 s slices).

    The token's decisions, baseline and floor requests all go over that client's one kept-alive
    connection, so one server worker answers the three workloads of a token. gunicorn's worker
    keeps the connections it accepted (the 24 connections of three pools were seen spread 11, 8,
    3 and 2 over 4 workers), so with a pool per workload each workload drew its own spread, and
    a workload whose connections piled on one worker ran slower for that alone: the ratio of
    two workloads carried the luck of two draws."""

    def __init__(self, api: str, tokens: list[str]) -> None:
        self.clients = {token: bench_client(api, token) for token in tokens}
        self.agents = self.floors = self.clients
        self.baselines = {token: client._http for token, client in self.clients.items()}

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


@contextmanager
def kept(clients: dict[str, Any] | None, token: str, make: Callable[[], Any]) -> Iterator[Any]:
    """The token's client from `clients` (its owner closes it), else a new one, closed after."""
    if clients is not None:
        yield clients[token]
        return
    with make() as client:
        yield client


def baseline_client(api: str, token: str) -> httpx.Client:
    """A bare httpx client for the baseline endpoint, its connection kept alive."""
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=api, headers=headers, timeout=60, transport=CountingTransport())


class BenchAgent:
    """The bench's simulated agent on one client: rounds (`one_round`) on a task of its own,
    which it finishes with verified evidence after `ROUNDS_PER_TASK` rounds. A task the guard
    stops, or a request that fails, is left for a new one. It counts the tasks it opened, the
    stops and the errors; `task` and `step` (the rounds done on it) say where it is."""

    def __init__(self, client: Client, task: str | None = None, step: int = 0) -> None:
        self.client = client
        self.task = task
        self.step = step
        self.tasks = self.stops = self.errors = 0

    def round(self, samples: Samples) -> None:
        if self.task is None:
            self.task = str(self.client.create_task("bench: export every invoice")["id"])
            self.step = 0
            self.tasks += 1
        self.step += 1
        try:
            one_round(self.client, self.task, self.step, samples)
            if self.step == ROUNDS_PER_TASK:
                timed(samples, "finish", self.client.finish, self.task,
                      evidence={"revision": ROUNDS_PER_TASK, "done": True})  # fmt: skip
                self.task = None
        except TaskStopped:
            self.stops += 1
            self.task = None
        except (LoopwardenError, httpx.HTTPError):
            self.errors += 1
            self.task = None


def drive_agents(
    api: str,
    tokens: list[str],
    seconds: float,
    carry: dict[str, tuple[str, int]] | None = None,
    pool: ClientPool | None = None,
) -> Run:
    """Each token's agent (`BenchAgent`) loops rounds for `seconds`. With `carry`, a slice of a
    longer run: an agent goes on with the task `carry` holds for its token (and the rounds done
    on it) and, when the time is up, leaves it running for the next slice (`stop_carried` ends
    them); without it, the task in progress is stopped at the end. With `pool`, each agent uses
    its client there."""

    def agent(token: str, stop_at: float, run: Run) -> None:
        samples: Samples = defaultdict(list)
        clients = pool.agents if pool is not None else None
        with kept(clients, token, lambda: bench_client(api, token)) as client:
            task, done = carry.pop(token, (None, 0)) if carry is not None else (None, 0)
            bench = BenchAgent(client, task, done)
            while time.monotonic() < stop_at:
                bench.round(samples)
            if bench.task is not None:
                if carry is not None:
                    carry[token] = (bench.task, bench.step)
                else:
                    client.stop(bench.task, reason="bench over")
        run.merge(samples, errors=bench.errors, stops=bench.stops, tasks=bench.tasks)

    return for_seconds(agent, tokens, seconds)


def stop_carried(api: str, carry: dict[str, tuple[str, int]]) -> None:
    """Stop the tasks a sliced run left running."""
    for token, (task_id, _done) in carry.items():
        with bench_client(api, token) as client:
            client.stop(task_id, reason="bench over")
    carry.clear()


def interleaved(
    api: str, tokens: list[str], seconds: float, slices: int, meter: CpuMeter | None = None
) -> tuple[Run, Run, Run, list[float]]:
    """The throughput phase: `slices` alternating slices of agents, of the baseline and of the
    floor, the same threads, `seconds` in all for each. A machine whose speed drifts during the
    run (other tenants, frequency) then slows them all alike; the ratio of the decisions and
    the baseline in each slice is returned too. Agents carry their tasks across slices, as one
    run of `seconds` would. With `meter`, each run's `cpu` says where the CPU went."""
    decisions, baseline, floor, ratios = Run(), Run(), Run(), []
    carry: dict[str, tuple[str, int]] = {}
    floor_tasks = {token: open_task(api, token, "bench: the floor") for token in tokens}
    pool = ClientPool(api, tokens)
    try:
        for _ in range(slices):
            part = seconds / slices
            agents = measured(meter, drive_agents, api, tokens, part, carry, pool)
            if meter is not None and not decisions.spread:
                decisions.spread = meter.connections(urlsplit(api).port or 80)
            calls = measured(meter, drive_baseline, api, tokens, part, pool)
            least = measured(meter, drive_floor, api, tokens, part, floor_tasks, pool)
            ratios.append(agents.rate(DECISIONS) / calls.rate(("baseline",)))
            decisions.absorb(agents)
            baseline.absorb(calls)
            floor.absorb(least)
    finally:
        pool.close()
    stop_carried(api, carry)
    stop_carried(api, {token: (task, 0) for token, task in floor_tasks.items()})
    return decisions, baseline, floor, ratios


def measured(meter: CpuMeter | None, drive: Callable[..., Run], *args: Any) -> Run:
    """`drive(*args)`, its run's `cpu` the CPU spent meanwhile (when there is a meter)."""
    start = meter.snapshot() if meter is not None else None
    run = drive(*args)
    if meter is not None and start is not None:
        run.cpu.add(start, meter.snapshot())
    return run


def open_task(api: str, token: str, goal: str) -> str:
    with bench_client(api, token) as client:
        return str(client.create_task(goal)["id"])


def drive_floor(
    api: str,
    tokens: list[str],
    seconds: float,
    tasks: dict[str, str] | None = None,
    pool: ClientPool | None = None,
) -> Run:
    """Each token posts the floor (`devtools.server.Floor`) on a task of its own (from `tasks`,
    else one opened and stopped here) for `seconds`, through the thin client's connection (its
    client in `pool`, when given)."""

    def caller(token: str, stop_at: float, run: Run) -> None:
        samples: Samples = defaultdict(list)
        errors = 0
        task = tasks[token] if tasks is not None else open_task(api, token, "bench: the floor")
        clients = pool.floors if pool is not None else None
        with kept(clients, token, lambda: bench_client(api, token)) as client:
            while time.monotonic() < stop_at:
                errors += post_floor(client, task, samples) != 200
            if tasks is None:
                client.stop(task, reason="bench over")
        run.merge(samples, errors=errors)

    return for_seconds(caller, tokens, seconds)


def post_floor(client: Client, task: str, samples: Samples) -> int:
    """One floor request on the client's kept-alive connection; its status (0: no answer)."""
    return posted(samples, "floor", client._http.post, "_bench/floor", json={"task": task})


def posted(samples: Samples, name: str, post: Callable[..., httpx.Response], *args: Any,
           **kw: Any) -> int:  # fmt: skip
    """`timed(samples, name, post, ...)`'s HTTP status, or 0 when no answer came (the
    connection failed or the server hung up): a reference request that failed is an error of
    its run, as a decision's is (`BenchAgent`)."""
    try:
        response = timed(samples, name, post, *args, **kw)
    except httpx.HTTPError:
        return 0
    return int(response.status_code)


def drive_baseline(
    api: str, tokens: list[str], seconds: float, pool: ClientPool | None = None
) -> Run:
    """Each token posts the baseline for `seconds` (on its client in `pool`, when given)."""

    def caller(token: str, stop_at: float, run: Run) -> None:
        samples: Samples = defaultdict(list)
        errors = 0
        clients = pool.baselines if pool is not None else None
        with kept(clients, token, lambda: baseline_client(api, token)) as http:
            while time.monotonic() < stop_at:
                errors += posted(samples, "baseline", http.post, "_bench/baseline") != 200
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
                    task=task, seq=seq, phase=1, round=step, model=MODEL, decision=terms.ALLOW,
                    est_prompt_tokens=800, max_output_tokens=200, reserved_cost=Decimal(0),
                    prompt_tokens=750, completion_tokens=150, cost=Decimal("0.0006"),
                    tool_calls=[{"name": "fetch_page", "args": {"page": step}}], settled_at=now,
                ))  # fmt: skip
            else:
                fingerprint, args_text = core.fingerprint("fetch_page", {"page": step}, [])
                tool_rows.append(ToolCall(
                    task=task, seq=seq, phase=1, tool="fetch_page", args={"page": step},
                    effect=terms.READ, fingerprint=fingerprint, args_text=args_text,
                    decision=terms.EXECUTE, result_kind="SUCCESS", result_data=page_data(step),
                    evidence=None if novelty else {"revision": step, "done": False},
                    result_decision=terms.CONTINUE, revision_after=0 if novelty else step,
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
) -> tuple[Samples, Samples, Samples]:
    """Decision latencies on fresh 10-row tasks and on one `length`-row task, and of the
    baseline and the floor (under those names in the third), interleaved and one at a time (no
    queueing: the cost of one request).
    `novelty`: the tasks judge progress by data hashes instead of evidence.

    The decisions, the baseline and the floor share one kept-alive connection, so one server
    worker answers them all: a request that came on another connection would wake another worker
    process, and whichever kind came first after the switch would pay for the wake-up."""
    short: Samples = defaultdict(list)
    long: Samples = defaultdict(list)
    references: Samples = defaultdict(list)
    headers = {"Authorization": f"Bearer {token}"}
    shared = CountingTransport()
    with (
        bench_client(api, token, shared) as client,
        httpx.Client(base_url=api, headers=headers, timeout=60, transport=shared) as http,
    ):
        long_task = client.create_task("bench: a very long task")["id"]
        floor_task = client.create_task("bench: the floor")["id"]
        grow_trace(long_task, length, samples, novelty=novelty)
        short_tasks = []
        for _ in range(samples):
            short_tasks.append(client.create_task("bench: a short task")["id"])
            grow_trace(short_tasks[-1], 10, 1, novelty=novelty)
        warm = client.create_task("bench: warm-up")["id"]
        grow_trace(warm, 10, 5, novelty=novelty)
        analyze()  # the grown traces' rows in the statistics before any decision is planned
        for n in range(1, 6):
            one_round(client, warm, 5 + n, defaultdict(list), novelty=novelty)
        for short_task, (short_step, long_step) in zip(
            short_tasks, trace_steps(length, samples), strict=True
        ):
            # A step past each task's prior rows: 10 rows are 5 rounds, the long task's too.
            one_round(client, short_task, short_step, short, novelty=novelty)
            one_round(client, long_task, long_step, long, novelty=novelty)
            for _ in range(4):  # as many as one round has decisions
                timed(references, "baseline", http.post, "_bench/baseline")
            for _ in range(4):
                if post_floor(client, floor_task, references) != 200:
                    raise LoopwardenError(200, "BENCH", "the floor answered an error")
        client.stop(floor_task, reason="bench over")
    return short, long, references


# -- near-duplicate threshold -------------------------------------------------------------------

THRESHOLD = 0.8
WINDOW_CALLS = 30
TOOL_WITH, TOOL_WITHOUT = "bench_kb_search_near", "bench_kb_search"
# A support agent searching its knowledge base: 40 x 30 queries, alike enough to share words
# (a lexical score up to about 0.6 between two of them), none a near duplicate at THRESHOLD.
SUBJECTS = (
    "refund policy", "invoice disputes", "shipping delays", "VAT rates", "currency conversion",
    "chargeback rules", "subscription renewals", "payment retries", "fraud screening",
    "customer onboarding", "warehouse capacity", "supplier contracts", "late fees",
    "credit limits", "bank holidays", "data retention", "account closure", "tax exemptions",
    "discount codes", "partial shipments", "return labels", "price matching", "loyalty points",
    "gift cards", "payout schedules", "dunning emails", "proration", "trial periods",
    "invoice numbering", "purchase orders", "escrow accounts", "wire transfers", "card declines",
    "address validation", "customs duties", "service outages", "SLA credits", "usage billing",
    "seat licenses", "refund approvals",
)  # fmt: skip
ASPECTS = (
    "for enterprise customers", "in Germany", "since the 2024 update", "examples", "edge cases",
    "who approves", "how long it takes", "common errors", "legal requirements", "in the EU",
    "for marketplaces", "internal FAQ", "escalation path", "API fields", "monthly report",
    "best practices", "known issues", "audit trail", "history of changes",
    "for small businesses", "in Japan", "with multiple currencies", "exceptions", "deadlines",
    "support macros", "risk scoring", "latest memo", "team owner", "metrics dashboard",
    "open tickets",
)  # fmt: skip


def search_args(query: str) -> dict[str, Any]:
    return {"query": query, "limit": 10}


def grow_window(task_id: str, tool: str, queries: list[str], **limits: Any) -> None:
    """Give a task one earlier call of `tool` per query, none of them progress: its trace rows
    (a model call and the tool call each) and, on the task row, the detection window they
    fill, with counters to match and room for more.

    The near-duplicate check scores a request against every call of its tool in the window,
    so this is the state in which it costs the most: a model searching around, not yet
    stopped by the stagnation limit (raised here). `limits` overrides some more."""
    from agents.models import ModelCall, Task, ToolCall

    now = timezone.now()
    with transaction.atomic(using=ALIAS):
        task = Task.objects.using(ALIAS).select_for_update().get(pk=task_id)
        model_rows, tool_rows, window = [], [], []
        for step, query in enumerate(queries, start=1):
            args = search_args(query)
            data = {"query": query, "hits": [{"title": f"KB-{step}", "score": 0.4}]}
            fingerprint, args_text = core.fingerprint(tool, args, [])
            model_rows.append(ModelCall(
                task=task, seq=2 * step - 1, phase=1, round=step, model=MODEL,
                decision=terms.ALLOW, est_prompt_tokens=800, max_output_tokens=200,
                reserved_cost=Decimal(0), prompt_tokens=750, completion_tokens=150,
                cost=Decimal("0.0006"), tool_calls=[{"name": tool, "args": args}],
                settled_at=now,
            ))  # fmt: skip
            tool_rows.append(ToolCall(
                task=task, seq=2 * step, phase=1, tool=tool, args=args, effect=terms.READ,
                fingerprint=fingerprint, args_text=args_text, decision=terms.EXECUTE,
                result_kind="SUCCESS", result_data=data, result_decision=terms.CONTINUE,
                revision_after=0, duration_ms=1, reported_at=now,
            ))  # fmt: skip
            window.append(terms.WindowEntry(fingerprint=fingerprint, tool=tool, args=args_text,
                                        result=f"{data}"[:80]).to_dict())  # fmt: skip
        ModelCall.objects.using(ALIAS).bulk_create(model_rows)
        ToolCall.objects.using(ALIAS).bulk_create(tool_rows)
        steps = len(queries)
        task.trace_seq = 2 * steps
        task.model_calls = task.tool_requests = task.tool_executions = steps
        task.tokens_used = 900 * steps
        task.cost_spent = Decimal("0.0006") * steps
        task.stagnant = steps
        task.window = window
        budget = 2 * steps + 10
        task.limits = {**task.limits, "max_model_calls": budget, "max_tool_requests": budget,
                       "max_tool_executions": budget, "max_tokens": 10**12,
                       "max_cost": "100000", "max_stagnant": budget,
                       "progress_mode": "evidence", **limits}  # fmt: skip
        task.deadline_at = now + timedelta(hours=1)
        task.save(using=ALIAS)


def threshold_queries(steady: bool) -> tuple[list[str], list[str]]:
    """The queries of the windows and of the measured requests.

    Cold, both from one pool of 1,200 that no worker has embedded. Steady, the windows from
    the first 10 aspects of every subject (400 queries the phase first asks through the API,
    as agents would have) and the measured requests from the other 800: each request is a new
    text, its window's are known to the deployment."""
    if not steady:
        queries = [f"{subject} {aspect}" for subject in SUBJECTS for aspect in ASPECTS]
        return queries, queries
    asked = [f"{subject} {aspect}" for subject in SUBJECTS for aspect in ASPECTS[:10]]
    new = [f"{subject} {aspect}" for subject in SUBJECTS for aspect in ASPECTS[10:]]
    return asked, new


def shared_cache_says() -> str:
    from django.conf import settings

    from agents.services.embeddings import shared_cache

    location = settings.CACHES["default"].get("LOCATION", "")
    return f"yes, {location}" if shared_cache() is not None else "none (CACHE_URL unset)"


def forget_vectors() -> int:
    """Drop the bench's texts from the cache the web processes share (CACHE_URL), so that a
    phase on new workers starts as cold as its name says. Returns how many were kept."""
    from django.core.cache import cache

    from agents import semantic
    from agents.services.embeddings import shared_cache

    if shared_cache() is None:
        return 0
    texts = [f"{subject} {aspect}" for subject in SUBJECTS for aspect in ASPECTS]
    keys = [semantic.shared_key(semantic.text_key(semantic.embed_text(
        core.fingerprint(TOOL_WITH, search_args(q), [])[1]))) for q in texts]  # fmt: skip
    kept = len(cache.get_many(keys))
    cache.delete_many(keys)
    return kept


def ask_once(client: Client, tool: str, queries: list[str]) -> Counter[str]:
    """Every query asked once through the API, as agents ask their calls (30 to a task, the
    limits raised so that none is refused for them): the service embeds each text when it is
    asked, as in service. Returns the decisions' counts."""
    decisions: Counter[str] = Counter()
    for start in range(0, len(queries), WINDOW_CALLS):
        task_id = client.create_task("bench: warming the knowledge base's queries")["id"]
        grow_window(task_id, tool, [], max_tool_requests=10**6, max_tool_executions=10**6,
                    max_stagnant=10**6, max_same_call=10**6)  # fmt: skip
        for query in queries[start : start + WINDOW_CALLS]:
            answer = client.request_tool(task_id, tool, search_args(query), effect="read")
            decisions[answer["decision"]] += 1
            if answer["decision"] == terms.EXECUTE:
                client.report_result(task_id, answer["tool_call"], "SUCCESS",
                                     data={"query": query, "hits": []})  # fmt: skip
    return decisions


def threshold_latency(
    api: str, token: str, samples: int, provider: str = "lexical", *, steady: bool = False
) -> tuple[Samples, Samples, int, dict[str, str]]:
    """Tool-request latencies (and statement counts) without and with a near-duplicate
    threshold on the tool's policy, one request at a time, alternating which goes first.

    Two tools, each with a policy of its own, alike but for the threshold; every request is on
    a fresh task whose window holds WINDOW_CALLS earlier calls of its tool, written straight
    into the database. Cold (the worst case for a provider that embeds texts), no worker has
    seen the window's texts: each is embedded before the decision. `steady` asks the windows'
    texts through the API first, as the agents that made those windows would have. The request
    itself is a new query: EXECUTE either way. Returns (without, with, requests not answered
    EXECUTE, and the decision each tool got for a rephrased earlier query: BLOCK shows the check
    ran)."""
    from agents.models import ToolPolicy

    # Saved one by one: the post_save signal bumps the catalog version, so every worker
    # reloads the policies at its next decision.
    for tool, threshold in ((TOOL_WITH, THRESHOLD), (TOOL_WITHOUT, None)):
        policy, _ = ToolPolicy.objects.using(ALIAS).get_or_create(tool=tool)
        policy.near_duplicate_threshold = threshold
        policy.similarity_provider = provider if threshold is not None else "lexical"
        policy.save(using=ALIAS)
    rng = random.Random(12)
    asked, new = threshold_queries(steady)
    if steady:
        new = rng.sample(new, len(new))
    without: Samples = defaultdict(list)
    with_: Samples = defaultdict(list)
    not_executed = 0

    def task_with_window(client: Client, tool: str, **limits: Any) -> tuple[str, str, str]:
        """A fresh task with its window grown, the query of its next request and the last
        query in its window."""
        task_id = client.create_task("bench: searching the knowledge base")["id"]
        prior = rng.sample(asked, WINDOW_CALLS + (0 if steady else 1))
        query = new.pop() if steady else prior.pop()
        grow_window(task_id, tool, prior, **limits)
        return task_id, query, prior[-1]

    with bench_client(api, token) as client:
        if steady:
            ask_once(client, TOOL_WITH, asked)
        warm_up = 8  # every worker loads the new policies before the clock starts
        for n in range(warm_up + samples):
            pair = [(TOOL_WITHOUT, without), (TOOL_WITH, with_)]
            ready = [(tool, into, *task_with_window(client, tool)) for tool, into in pair]
            for tool, into, task_id, query, _ in ready if n % 2 else reversed(ready):
                measured = into if n >= warm_up else defaultdict(list)
                answer = timed(measured, "tool", client.request_tool, task_id, tool,
                               search_args(query), effect="read")  # fmt: skip
                if answer["decision"] != terms.EXECUTE and n >= warm_up:
                    not_executed += 1
        # One near member is a cluster big enough here (max_same_call 1): the rephrased query
        # is BLOCKed if and only if the check ran.
        probe = {}
        for tool in (TOOL_WITHOUT, TOOL_WITH):
            task_id, _, earlier = task_with_window(client, tool, max_same_call=1)
            rephrased = search_args(f"please, {earlier}")
            probe[tool] = client.request_tool(task_id, tool, rephrased, effect="read")["decision"]
    return without, with_, not_executed, probe


# -- keep-alive ---------------------------------------------------------------------------------


def keepalive_pairs(api: str, token: str, pairs: int) -> tuple[list[float], list[float]]:
    """Milliseconds per tool request + result: on one kept-alive connection, then with a new
    connection (a new client) for every request."""

    def pair(client: Client, task_id: str, n: int) -> None:
        call = client.request_tool(task_id, "fetch_page", {"page": n})
        client.report_result(task_id, call["tool_call"], "SUCCESS", data=page_data(n),
                             evidence={"revision": n, "done": False})  # fmt: skip

    def roomy_task(client: Client) -> str:
        task_id = client.create_task("bench: keep-alive")["id"]
        grow_trace(task_id, 0, pairs + 2)
        return task_id

    kept, fresh = [], []
    with bench_client(api, token) as client:
        task_id = roomy_task(client)
        pair(client, task_id, 1)  # the connection is open before the clock starts
        for n in range(2, pairs + 2):
            started = time.perf_counter()
            pair(client, task_id, n)
            kept.append((time.perf_counter() - started) * 1000)
        task_id = roomy_task(client)
    for n in range(1, pairs + 1):
        started = time.perf_counter()
        with bench_client(api, token) as one:
            call = one.request_tool(task_id, "fetch_page", {"page": n})
        with bench_client(api, token) as one:
            one.report_result(task_id, call["tool_call"], "SUCCESS", data=page_data(n),
                              evidence={"revision": n, "done": False})  # fmt: skip
        fresh.append((time.perf_counter() - started) * 1000)
    return kept, fresh


# -- soak ---------------------------------------------------------------------------------------


class Soak:
    def __init__(self, run: Run, differences: list[str]) -> None:
        self.run = run
        self.differences = differences


def drive_soak(api: str, tokens: list[str], decisions: int) -> Soak:
    """`decisions` decisions in all, shared by the agents (four per round), then every task's
    counters compared with the rows of its trace."""
    rounds_each = max(1, math.ceil(decisions / (4 * len(tokens))))
    task_ids: list[str] = []
    ids_lock = threading.Lock()

    def agent(token: str, _stop_at: float, run: Run) -> None:
        samples: Samples = defaultdict(list)
        errors = stops = tasks = 0
        done = 0
        with bench_client(api, token) as client:
            while done < rounds_each:
                task_id = client.create_task("bench: soak")["id"]
                with ids_lock:
                    task_ids.append(task_id)
                tasks += 1
                try:
                    for n in range(1, min(ROUNDS_PER_TASK, rounds_each - done) + 1):
                        one_round(client, task_id, n, samples)
                        done += 1
                except TaskStopped:
                    stops += 1
                    done += 1
                except (LoopwardenError, httpx.HTTPError):
                    errors += 1
                    done += 1
        run.merge(samples, errors=errors, stops=stops, tasks=tasks)

    run = for_seconds(agent, tokens, 0.0)
    return Soak(run, counter_differences(task_ids))


def counter_differences(task_ids: list[str]) -> list[str]:
    """Tasks whose counters differ from their trace: model calls allowed, tool requests
    answered, executions, tokens and money spent, reservations left open."""
    from django.db.models import Count, Q, Sum

    from agents.models import ModelCall, Task, ToolCall

    differences = []
    for task in Task.objects.using(ALIAS).filter(pk__in=task_ids):
        calls = (
            ModelCall.objects.using(ALIAS)
            .filter(task=task)
            .aggregate(
                allowed=Count("id", filter=Q(decision=terms.ALLOW)),
                tokens=Sum("prompt_tokens", default=0) + Sum("completion_tokens", default=0),
                cost=Sum("cost", default=Decimal(0)),
            )
        )
        tools = (
            ToolCall.objects.using(ALIAS)
            .filter(task=task)
            .aggregate(
                requests=Count("id", filter=~Q(decision=terms.STOP)),
                executions=Count("id", filter=Q(decision=terms.EXECUTE)),
            )
        )
        expected = {
            "model_calls": calls["allowed"], "tokens_used": calls["tokens"],
            "cost_spent": calls["cost"], "tool_requests": tools["requests"],
            "tool_executions": tools["executions"], "tokens_reserved": 0,
            "cost_reserved": Decimal(0),
        }  # fmt: skip
        for name, value in expected.items():
            if getattr(task, name) != value:
                differences.append(f"task {task.pk}: {name} {getattr(task, name)} != {value}")
    return differences
