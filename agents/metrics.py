"""What Prometheus sees of the guard: counters moved by decisions and sweeps, and gauges read
from the database when it scrapes.

Counters and the latency histogram live in the process that decided (a web worker, a Celery
worker); prometheus_client's multiprocess mode keeps them in files under
PROMETHEUS_MULTIPROC_DIR, and a scrape of any web worker sums the files of every process (see
`registry`). The settings put that folder in the environment before this module imports the
client, which picks its storage at import time.

Gauges of state (tasks by state, operations waiting for a verdict, spend today) are not kept
in any process: `DatabaseCollector` counts them from the database at each scrape, so every
worker answers the same numbers and nothing can drift from the rows.

The hot path pays one counter increment and one histogram observation per decision, plus one
more increment when the decision stops the task. Label values are bounded: kinds, decisions
and reasons are the fixed words of docs/DESIGN.md; no task, agent or tool name is a label.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import CollectorRegistry, Counter, Histogram, values
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from agents import selectors
from agents.guard import terms
from ledger.selectors import operations_waiting_verdict

if not getattr(values.ValueClass, "_multiprocess", False):
    # Something imported prometheus_client before the settings set PROMETHEUS_MULTIPROC_DIR:
    # each process would count alone and a scrape would show one worker's share.
    raise ImproperlyConfigured(
        "prometheus_client was imported before loopwarden.settings set PROMETHEUS_MULTIPROC_DIR"
    )

# Metric objects register nowhere: in multiprocess mode the samples come from the files, and
# `registry()` builds a fresh registry per scrape (the client's documented pattern).
DECISIONS = Counter(
    "loopwarden_decisions",
    "Decisions answered, by kind of request (model_call, usage, tool_call, tool_result, "
    "finish, stop, lease_sweep, deadline_sweep), decision and reason ('' when none).",
    ["kind", "decision", "reason"],
    registry=None,
)
STOPS = Counter(
    "loopwarden_stops",
    "Tasks stopped (moved to a terminal state), by reason and code ('' for goal_met).",
    ["reason", "code"],
    registry=None,
)
TRIPS = Counter(
    "loopwarden_trips",
    "Breaker trips: stops by the guard's rules (not a completion, an unverified finish, or a "
    "person or an agent stopping the task), by code.",
    ["code"],
    registry=None,
)
DECISION_SECONDS = Histogram(
    "loopwarden_decision_seconds",
    "Seconds from the request's arrival to its decision committed, by kind of request.",
    ["kind"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=None,
)
SWEEP_RUNS = Counter(
    "loopwarden_sweep_runs",
    "Runs of a Celery sweep job (lease, deadline, reservation).",
    ["sweep"],
    registry=None,
)
SWEEP_ROWS = Counter(
    "loopwarden_sweep_rows",
    "Rows the sweep runs changed: `claimed` operations, tasks or model calls, and tasks "
    "`stopped` as a result.",
    ["sweep", "result"],
    registry=None,
)

# When the request being served arrived (perf_counter), for the latency of its decision.
# A context variable, so each thread (gthread workers) and each ASGI request has its own.
# Unset outside requests: sweeps in Celery count decisions but time none.
_request_arrived: ContextVar[float | None] = ContextVar("request_arrived", default=None)


def request_arrived(**_kwargs: Any) -> None:
    """Receiver of Django's `request_started` (connected in `AgentsConfig.ready`)."""
    _request_arrived.set(time.perf_counter())


def request_done(**_kwargs: Any) -> None:
    """Receiver of `request_finished`: work after it in this thread is no request's."""
    _request_arrived.set(None)


# Each metric's child for a label set, found once: `labels()` converts, locks and looks it up
# on every call. (A child outlives a fork: its value notices the new process id and writes its
# own file.)
_CHILDREN: dict[tuple[Any, tuple[str, ...]], Any] = {}


def _child(metric: Any, *labels: str) -> Any:
    key = (metric, labels)
    child = _CHILDREN.get(key)
    if child is None:
        child = _CHILDREN[key] = metric.labels(*labels)
    return child


def decision_counted(kind: str, decision: str, reason: str | None, *, stopped: bool) -> None:
    """Count one decision; called by `hooks.decision_logged` whatever the log level."""
    _child(DECISIONS, kind, decision, reason or "").inc()
    if stopped:
        code = terms.REASON_CODES.get(reason or "") or ""
        _child(STOPS, reason or "", code).inc()
        if terms.is_trip(reason):
            _child(TRIPS, code).inc()
    arrived = _request_arrived.get()
    if arrived is not None:
        _child(DECISION_SECONDS, kind).observe(time.perf_counter() - arrived)


def sweep_counted(sweep: str, *, claimed: int, stopped: int) -> None:
    """Count one run of a sweep job and the rows it changed (zero counts too: it ran)."""
    _child(SWEEP_RUNS, sweep).inc()
    _child(SWEEP_ROWS, sweep, "claimed").inc(claimed)
    _child(SWEEP_ROWS, sweep, "stopped").inc(stopped)


class DatabaseCollector(Collector):
    """Gauges counted from the database at scrape time (a few aggregate queries).

    If the database does not answer, the scrape still succeeds with the counters and
    `loopwarden_database_up 0`, so an alert can say what is wrong.
    """

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily(
            "loopwarden_database_up", "1 if the database answered this scrape's queries."
        )
        try:
            families = list(self._from_database())
        except DatabaseError:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    @staticmethod
    def _from_database() -> Iterator[GaugeMetricFamily]:
        now = timezone.now()
        tasks = GaugeMetricFamily("loopwarden_tasks", "Tasks by state.", labels=["state"])
        found = selectors.task_counts_by_state()
        for state in terms.TASK_STATES:
            tasks.add_metric([state], found.get(state, 0))
        yield tasks

        waiting = operations_waiting_verdict(now=now).aggregate(
            n=Count("id"), oldest=Min("claimed_at")
        )
        yield GaugeMetricFamily(
            "loopwarden_operations_waiting",
            "Write operations waiting for a verdict: UNKNOWN, or IN_FLIGHT past their lease.",
            value=waiting["n"],
        )
        oldest = (now - waiting["oldest"]).total_seconds() if waiting["oldest"] else 0
        yield GaugeMetricFamily(
            "loopwarden_operations_waiting_oldest_seconds",
            "Age of the oldest claim waiting for a verdict (0 when none waits).",
            value=max(oldest, 0),
        )

        trips = GaugeMetricFamily(
            "loopwarden_trips_today",
            "Breaker trips this UTC day, by code, counted from the stops recorded: the number "
            "the console's dashboard and daily report show.",
            labels=["code"],
        )
        found = selectors.trips_on(now.date())
        for code in terms.TRIP_CODES:
            trips.add_metric([code], found.get(code, 0))
        yield trips

        spent, reserved = selectors.spend_on(now.date())
        spend = GaugeMetricFamily(
            "loopwarden_spend_today",
            "Money of all agents today (UTC day), in the price table's currency: `spent` "
            "(settled and expired reservations) and `reserved` (gates not yet settled).",
            labels=["kind"],
        )
        spend.add_metric(["spent"], float(spent))
        spend.add_metric(["reserved"], float(reserved))
        yield spend


def registry() -> CollectorRegistry:
    """A registry for one scrape: every process's counters, then the database gauges."""
    scrape = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(scrape, path=str(settings.PROMETHEUS_MULTIPROC_DIR))
    scrape.register(DatabaseCollector())
    return scrape
