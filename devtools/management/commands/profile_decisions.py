"""`manage.py profile_decisions`: where a decision's server CPU goes, step by step.

`manage.py bench` says how much CPU a request costs in each process under load; this says what
the server spends it on. It runs the app in one process, without gunicorn or a network: the
thin client sends the bench's rounds (gate, usage, tool request, result; a write every fourth
step) through Django's WSGI handler, then the baseline and the floor the same number of
times. Around each step of the road a request takes (Django's handler, the token
authentication, DRF, the body's parsing and validation, the task lock, the rules, the writes,
the commit, the log line and metrics, the answer) it adds up the CPU time spent in that step
and not in a step inside it, with `time.process_time`.

The steps are named functions of the code (`STEPS`); a test checks that each is still there.
Waiting on the database is not CPU, but the CPU the driver spends sending, receiving and
decoding is charged to the step that ran the statement. The figures are a measurement, not a
test: compare the columns of one run, not runs on different days.

`--instructions` counts instead of timing: it runs each workload alone under valgrind's
cachegrind (`valgrind` must be installed), once for `--rounds` and once for three times as many,
and prints the difference of the two counts per request (start-up and warm-up cancel out; the
thin client's instructions are included, as they are in the process). A count moves by less
than 0.5% between runs of the same code, so it shows a change that no timing on a busy machine
can.

On PostgreSQL it also prints the database's side of each workload, per request: the CPU of
the PostgreSQL backend serving the process (read from /proc, when the server runs on this
machine), the write-ahead log written (`pg_stat_wal`: the whole server's, so run it on a quiet
one) and, where `pg_stat_statements` is loaded (`shared_preload_libraries`), the time spent
executing statements (the extension is created in the profile's database if missing).

It needs a database of its own, as the bench does (`--database-url`: created and migrated if
missing; SQLite with sqlite:///path). It runs itself again in a child process with that
database as its default.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test.utils import override_settings
from loopwarden_client import Client

from devtools import cpu
from devtools.management.commands import bench

# (label, module, attribute): the steps of the road, outermost first. A step's figure is the
# CPU spent in it and not in a step listed here that it calls.
STEPS: list[tuple[str, str, str]] = [
    ("Django: middleware, URL routing", "django.core.handlers.wsgi", "WSGIHandler.__call__"),
    ("DRF: request, negotiation, dispatch", "rest_framework.views", "APIView.dispatch"),
    ("authentication", "agents.api.auth", "BearerTokenAuthentication.authenticate"),
    ("body: parsing and validation", "agents.api.views", "_valid"),
    ("view", "agents.api.views", "ModelCallGate.post"),
    ("view", "agents.api.views", "ModelCallUsage.post"),
    ("view", "agents.api.views", "ToolCallRequest.post"),
    ("view", "agents.api.views", "ToolCallResult.post"),
    ("view", "agents.api.views", "TaskFinish.post"),
    ("view", "agents.api.views", "TaskList.post"),
    ("view (the baseline: its UPDATE)", "devtools.server", "Baseline.post"),
    ("view (the floor: all its work)", "devtools.server", "Floor.post"),
    ("service code", "agents.services.runner", "model_call_gate"),
    ("service code", "agents.services.runner", "model_call_usage"),
    ("service code", "agents.services.runner", "_tool_call_request_once"),
    ("service code", "agents.services.runner", "tool_call_result"),
    ("service code", "agents.services.runner", "task_finish"),
    ("reads of a fixed shape (token, lock)", "agents.db.prepared", "Prepared.rows"),
    ("task row: to the rules' state", "agents.services.runner", "to_state"),
    ("task row: from the rules' state", "agents.services.runner", "apply_state"),
    ("task row: changed columns", "agents.services.runner", "save_task"),
    ("trace row: insert", "agents.services.runner", "insert_row"),
    ("call row: update", "agents.services.runner", "save_columns"),
    ("model instances: Model.__init__", "django.db.models.base", "Model.__init__"),
    ("transaction: begin, end", "django.db.transaction", "Atomic.__enter__"),
    ("transaction: begin, end", "django.db.transaction", "Atomic.__exit__"),
    ("writes sent together", "agents.db.prepared", "_send"),
    ("rules (guard core)", "agents.guard.core", "*"),
    ("ledger", "ledger.services", "*"),
    ("stop: record and report", "agents.services.stops", "record_stop"),
    ("commit", "django.db.backends.base.base", "BaseDatabaseWrapper.commit"),
    ("decision log line and metrics", "agents.services.hooks", "decision_logged"),
    ("answer: JSON rendering", "rest_framework.renderers", "JSONRenderer.render"),
]

WORKLOADS = ("decisions", "baseline", "floor")


class Ledger:
    """CPU seconds and calls by step and workload, each step's own (`wrap`)."""

    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.calls: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.workload = ""
        self._inner: list[float] = []

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def step(*args: Any, **kwargs: Any) -> Any:
            if not self.workload:
                return fn(*args, **kwargs)
            started = time.process_time()
            self._inner.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.process_time() - started
                inner = self._inner.pop()
                self.seconds[self.workload][label] += spent - inner
                self.calls[self.workload][label] += 1
                if self._inner:
                    self._inner[-1] += spent

        return step


def step_targets(module_name: str, attribute: str) -> list[tuple[Any, str]]:
    """(owner, name) of each function a step names: `Class.method`, a module function, or
    `*`, every function the module defines itself."""
    module = importlib.import_module(module_name)
    if attribute == "*":
        return [
            (module, name)
            for name, value in vars(module).items()
            if callable(value)
            and not isinstance(value, type)
            and not name.startswith("_")
            and getattr(value, "__module__", "").startswith(module_name.rsplit(".", 1)[0])
        ]
    owner: Any = module
    *path, name = attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    if not callable(getattr(owner, name, None)):
        raise LookupError(f"{module_name}.{attribute} is not a function")
    return [(owner, name)]


@contextmanager
def wrapped(ledger: Ledger) -> Iterator[None]:
    """Every step of `STEPS` wrapped for the block, put back after."""
    originals: list[tuple[Any, str, Any]] = []
    try:
        for label, module_name, attribute in STEPS:
            for owner, name in step_targets(module_name, attribute):
                # A class's own entry (an inherited method has none: put back by removing).
                originals.append((owner, name, vars(owner).get(name, _INHERITED)))
                setattr(owner, name, ledger.wrap(label, getattr(owner, name)))
        yield
    finally:
        for owner, name, original in reversed(originals):
            if original is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


_INHERITED = object()


class Command(BaseCommand):
    help = "Where a decision's server CPU goes, step by step, in one process (no gunicorn)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--rounds", type=int, default=300,
                            help="agent rounds (4 decisions each); as many baseline and floor "
                            "requests as decisions")  # fmt: skip
        parser.add_argument(
            "--database-url",
            default="postgres://postgres@127.0.0.1:5432/loopwarden_bench",
            help="a database of its own (created and migrated if missing), as for the bench",
        )
        parser.add_argument("--instructions", action="store_true",
                            help="count instructions per request under valgrind (cachegrind) "
                            "instead of timing the steps")  # fmt: skip
        parser.add_argument("--in-process", action="store_true", help="(internal) the child")
        parser.add_argument("--only", choices=WORKLOADS, help="(internal) one workload, unwrapped")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["rounds"] < 1:
            raise CommandError("--rounds must be at least 1")
        if opts["in_process"] and opts["only"]:
            self.stdout.write(f"requests: {self.only(opts['only'], opts['rounds'])}")
            return
        if opts["in_process"]:
            self.profile(opts["rounds"])
            return
        if opts["instructions"]:
            self.count_instructions(opts)
            return
        self.run_child(opts)

    def child_env(self, opts: dict[str, Any]) -> dict[str, str]:
        """The child's environment, its database created and migrated if missing."""
        url = opts["database_url"]
        bench.check_database_url(url)
        bench.prepare_database(url)
        return {
            **os.environ,
            "DATABASE_URL": url,
            **bench.server_env(
                os.environ.get("DB_CONN_MAX_AGE", "60"), os.environ.get("LOG_LEVEL", "INFO")
            ),
        }

    def run_child(self, opts: dict[str, Any]) -> None:
        url = opts["database_url"]
        env = self.child_env(opts)
        command = [sys.executable, "manage.py", "profile_decisions", "--in-process",
                   "--rounds", str(opts["rounds"]), "--database-url", url]  # fmt: skip
        # The decision log lines go to the child's standard error: to nowhere, as in the bench.
        done = subprocess.run(command, cwd=bench.ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        self.stdout.write(done.stdout.rstrip("\n"))
        if done.returncode != 0:
            raise CommandError(f"the profile's process failed (exit {done.returncode})")

    def count_instructions(self, opts: dict[str, Any]) -> None:
        valgrind = shutil.which("valgrind")
        if valgrind is None:
            raise CommandError("--instructions needs valgrind (e.g. apt-get install valgrind)")
        env = self.child_env(opts)
        rounds = opts["rounds"]
        out = self.stdout.write
        out(f"instructions per request, counted by valgrind (cachegrind), one process "
            f"({opts['database_url'].split(':', 1)[0]}; Django's WSGI handler called by the thin "
            f"client, whose instructions are included): {3 * rounds} rounds' count less "
            f"{rounds} rounds', over the requests between them")  # fmt: skip
        per_request = {}
        for workload in WORKLOADS:
            counts = [self.counted(valgrind, env, opts, workload, n) for n in (rounds, 3 * rounds)]
            (small, few), (large, many) = counts
            per_request[workload] = (large - small) / (many - few)
            out(f"  {workload:<10} {per_request[workload] / 1e6:>8.3f} million "
                f"({many - few} requests)")  # fmt: skip
        base = per_request["baseline"]
        out(f"a decision: {per_request['decisions'] / base:.2f}x the baseline's instructions, "
            f"{per_request['decisions'] / per_request['floor']:.2f}x the floor's")  # fmt: skip

    def counted(
        self, valgrind: str, env: dict[str, str], opts: dict[str, Any], workload: str, rounds: int
    ) -> tuple[int, int]:
        """Instructions the child ran for `rounds` of `workload`, and its requests."""
        with tempfile.TemporaryDirectory() as folder:
            log = Path(folder) / "valgrind.log"
            command = [valgrind, "--tool=cachegrind", "--cache-sim=no",
                       "--cachegrind-out-file=/dev/null", f"--log-file={log}", sys.executable,
                       "manage.py", "profile_decisions", "--in-process", "--only", workload,
                       "--rounds", str(rounds), "--database-url", opts["database_url"]]  # fmt: skip
            done = subprocess.run(command, cwd=bench.ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)  # fmt: skip
            found = re.search(r"I\s+refs:\s+([\d,]+)", log.read_text() if log.exists() else "")
        requests = re.search(r"^requests: (\d+)$", done.stdout, re.MULTILINE)
        if done.returncode != 0 or found is None or requests is None:
            raise CommandError(f"{workload}: the counted process failed (exit {done.returncode})")
        return int(found.group(1).replace(",", "")), int(requests.group(1))

    def only(self, workload: str, rounds: int) -> int:
        """The child of `--instructions`: warm up, then `rounds` of one workload, unwrapped; the
        requests it sent."""
        from django.core.wsgi import get_wsgi_application

        with opened(get_wsgi_application()) as (client, agent, floor_task):
            return send(client, agent, floor_task, workload, rounds)

    def profile(self, rounds: int) -> None:
        from django.core.wsgi import get_wsgi_application
        from django.db import connection

        server = [0.0]
        application = get_wsgi_application()

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
            started = time.process_time()
            try:
                return [b"".join(application(environ, start_response))]
            finally:
                server[0] += time.process_time() - started

        ledger = Ledger()
        counts: dict[str, int] = {}
        spent: dict[str, tuple[float, float]] = {}
        database: dict[str, DatabaseSide] = {}
        with opened(app) as (client, agent, floor_task), wrapped(ledger):
            watched = database_watch(connection)
            for workload in WORKLOADS:
                before = watched() if watched else None
                ledger.workload = workload
                server[0] = 0.0
                started = time.process_time()
                counts[workload] = send(client, agent, floor_task, workload, rounds)
                spent[workload] = (server[0], time.process_time() - started)
                ledger.workload = ""
                if watched and before is not None:
                    database[workload] = watched() - before
        self.report(ledger, counts, spent, connection.vendor)
        if database:
            self.report_database(database, counts)

    def report(
        self,
        ledger: Ledger,
        counts: dict[str, int],
        spent: dict[str, tuple[float, float]],
        vendor: str,
    ) -> None:
        out = self.stdout.write
        out(f"where the server's CPU goes, in one process ({vendor}; Django's WSGI handler "
            "called by the thin client, no gunicorn, no network):")  # fmt: skip
        out(
            f"  requests: {counts['decisions']} decisions (the bench's rounds, task creations "
            f"and finishes included), {counts['baseline']} baseline, {counts['floor']} floor"
        )
        out(
            "  ms of CPU per request spent in each step and not in a step inside it; "
            "(n): calls per request"
        )
        head = f"{'step':<38}" + "".join(f"{w:>16}" for w in WORKLOADS)
        out(head)
        out("-" * len(head))
        labels = list(dict.fromkeys(label for label, _module, _attribute in STEPS))
        for label in labels:
            cells = []
            for workload in WORKLOADS:
                calls = ledger.calls[workload].get(label, 0)
                if not calls:
                    cells.append(f"{'':>16}")
                    continue
                ms = ledger.seconds[workload][label] * 1000 / counts[workload]
                cells.append(f"{ms:>9.3f} ({calls / counts[workload]:.1f})".rjust(16))
            if any(cell.strip() for cell in cells):
                out(f"{label:<38}" + "".join(cells))
        out("-" * len(head))
        rows = {
            "all steps": [sum(ledger.seconds[w].values()) for w in WORKLOADS],
            "the server (around the WSGI call)": [spent[w][0] for w in WORKLOADS],
            "the thin client and its transport": [spent[w][1] - spent[w][0] for w in WORKLOADS],
        }
        for label, values in rows.items():
            out(f"{label:<38}" + "".join(
                f" {v * 1000 / counts[w]:>9.3f}".ljust(16)
                for v, w in zip(values, WORKLOADS, strict=True)
            ).rstrip())  # fmt: skip
        server = [spent[w][0] * 1000 / counts[w] for w in WORKLOADS]
        out(
            f"the server's CPU per decision: {server[0] / server[1]:.2f}x the baseline's, "
            f"{server[0] / server[2]:.2f}x the floor's"
        )

    def report_database(self, database: dict[str, DatabaseSide], counts: dict[str, int]) -> None:
        out = self.stdout.write
        first = database[WORKLOADS[0]]
        out("")
        out("PostgreSQL's side, per request: the CPU of the backend serving this process "
            "(/proc), the write-ahead log written (pg_stat_wal, the whole server's) and the "
            "statements' execution time (pg_stat_statements)")  # fmt: skip
        head = f"{'':<38}" + "".join(f"{w:>16}" for w in WORKLOADS)
        out(head)
        out("-" * len(head))
        rows: list[tuple[str, str, Callable[[DatabaseSide], float | None]]] = [
            ("backend CPU, ms", "{:.3f}", lambda d: _ms(d.backend_cpu)),
            ("WAL records", "{:.1f}", lambda d: d.wal_records),
            ("WAL full-page images", "{:.2f}", lambda d: d.wal_fpi),
            ("WAL bytes", "{:.0f}", lambda d: d.wal_bytes),
            ("statements' execution, ms", "{:.3f}", lambda d: d.executed_ms),
        ]
        for label, form, value in rows:
            cells = []
            for workload in WORKLOADS:
                got = value(database[workload])
                shown = "-" if got is None else form.format(got / counts[workload])
                cells.append(f"{shown:>16}")
            out(f"{label:<38}" + "".join(cells))
        if first.backend_cpu is None:
            out("  backend CPU: the PostgreSQL server is not on this machine (no /proc entry)")
        if first.executed_ms is None:
            out("  statements' execution: pg_stat_statements is not loaded on this server "
                "(shared_preload_libraries)")  # fmt: skip


@dataclass(frozen=True)
class DatabaseSide:
    """PostgreSQL's counters as one snapshot, or the difference of two (`-`): the backend's CPU
    seconds, the WAL written, the statements' execution time (ms). None: not available."""

    backend_cpu: float | None
    wal_records: float
    wal_fpi: float
    wal_bytes: float
    executed_ms: float | None

    def __sub__(self, other: DatabaseSide) -> DatabaseSide:
        def less(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else a - b

        return DatabaseSide(
            less(self.backend_cpu, other.backend_cpu),
            self.wal_records - other.wal_records,
            self.wal_fpi - other.wal_fpi,
            self.wal_bytes - other.wal_bytes,
            less(self.executed_ms, other.executed_ms),
        )


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def database_watch(connection: Any) -> Callable[[], DatabaseSide] | None:
    """A function taking `DatabaseSide` snapshots of `connection`'s PostgreSQL server (None on
    another database). The backend is the one serving `connection` now; the profile runs its
    requests on that one connection."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    statements = _statements_readable(connection)
    flushes = _flush_forced(connection)

    def snapshot() -> DatabaseSide:
        if flushes:
            # A backend hands its counters to the shared statistics when it goes idle, at most
            # once a second unless forced: forced here, so the statement after this one reads
            # the WAL of every request sent so far (they all ran on this backend).
            _flush_forced(connection)
        with connection.cursor() as cursor:
            cursor.execute("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal")
            records, fpi, size = cursor.fetchone()
            executed = None
            if statements:
                cursor.execute(
                    "SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements WHERE dbid "
                    "= (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "AND query NOT LIKE '%pg_stat%'"
                )
                (executed,) = cursor.fetchone()
        times = cpu.process_times(pid)
        return DatabaseSide(
            None if times is None else times.own, float(records), float(fpi), float(size),
            None if executed is None else float(executed),
        )  # fmt: skip

    return snapshot


def _flush_forced(connection: Any) -> bool:
    """Ask the backend to flush its statistics when it next goes idle (PostgreSQL 15 and
    later); False where the server has no such function."""
    return _ran(connection, "SELECT pg_stat_force_next_flush()")


def _statements_readable(connection: Any) -> bool:
    """Whether pg_stat_statements can be read here: loaded by the server, and the extension
    created in this database (created now if missing)."""
    return _ran(
        connection,
        "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
        "SELECT count(*) FROM pg_stat_statements",
    )


def _ran(connection: Any, *statements: str) -> bool:
    """Whether `statements` ran without a database error (autocommit: a failed one changes
    nothing)."""
    from django.db import DatabaseError

    try:
        with connection.cursor() as cursor:
            for sql in statements:
                cursor.execute(sql)
    except DatabaseError:
        return False
    return True


@contextmanager
def opened(app: Callable[..., Any]) -> Iterator[tuple[Client, bench.BenchAgent, str]]:
    """The bench's agent on `app` (a WSGI application) through the thin client, with a task for
    the floor, warmed up (statements prepared, caches filled); its tasks stopped after."""
    from django.db import connection

    bench.use_database(os.environ["DATABASE_URL"])
    (token,) = bench.prepare_agents(1)
    if connection.vendor == "postgresql":
        bench.analyze()
    api = "http://127.0.0.1/api/v1/"
    client = Client(api, token, timeout=60, transport=httpx.WSGITransport(app=app))
    agent = bench.BenchAgent(client)
    with override_settings(ALLOWED_HOSTS=["127.0.0.1"]):
        floor_task = str(client.create_task("profile: the floor")["id"])
        run_rounds(agent, 20)  # warm: statements prepared, caches filled
        repeat(client, "baseline", floor_task, 20)
        repeat(client, "floor", floor_task, 20)
        yield client, agent, floor_task
        client.stop(floor_task, reason="profile over")
        if agent.task is not None:
            client.stop(agent.task, reason="profile over")
    client.close()


def send(
    client: Client, agent: bench.BenchAgent, floor_task: str, workload: str, rounds: int
) -> int:
    """`rounds` of the bench's agent (decisions), or four times as many baseline or floor
    requests; the requests sent."""
    if workload == "decisions":
        return run_rounds(agent, rounds)
    return repeat(client, workload, floor_task, 4 * rounds)


def run_rounds(agent: bench.BenchAgent, rounds: int) -> int:
    """`rounds` rounds of the bench's agent; the requests it sent (task creations included)."""
    samples: bench.Samples = defaultdict(list)
    opened = agent.tasks
    for _ in range(rounds):
        agent.round(samples)
    return sum(len(v) for name, v in samples.items() if "#" not in name) + agent.tasks - opened


def repeat(client: Client, workload: str, floor_task: str, times: int) -> int:
    """Send the baseline or the floor `times` times; each must answer 200."""
    samples: bench.Samples = defaultdict(list)
    for _ in range(times):
        if workload == "baseline":
            status = client._http.post("_bench/baseline").status_code
        else:
            status = bench.post_floor(client, floor_task, samples)
        if status != 200:
            raise CommandError(f"{workload}: HTTP {status}")
    return times
