"""The growth phase of `manage.py bench`: a large history seeded fast, and the pages, lists and
jobs timed against it.

History is seeded without the API: tasks, their phases and ledger rows by bulk inserts (the
ORM's `bulk_create`, one statement per few thousand rows), and the trace (model and tool calls,
stop events) by one `INSERT ... SELECT` per table that multiplies each seeded task by its own
trace length in the database (a recursive series: PostgreSQL and SQLite both run it), so
millions of rows never pass through Python.

Spreads: tasks at one daily rate over the days from `OLDEST_DAY` to `NEWEST_DAY` ago, over
`AGENTS` agents (a few busy, many quiet: Zipf weights), over the terminal states (mostly
COMPLETED), with traces of 2 to 48 calls, written in time order as a live system appends them.
The small history is the most recent weeks (`history_days`), the large one adds the older
days, so a page about the last 30 days reads the same rows at both sizes, and today's and
yesterday's work (`seed_today`) is the same too: what is measured is the cost of the history
alone.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as dtime
from decimal import Decimal

from django.db import DatabaseError, connection, transaction
from django.db.models import Sum
from django.utils import timezone

from agents.guard import terms
from agents.models import Agent, DailyRollup, Phase, Task
from ledger.models import Operation

AGENTS = 20
OLDEST_DAY = 365
NEWEST_DAY = 3
MAX_TRACE = 48
BATCH = 5000
STATES = {  # ended tasks by state, in percent
    terms.COMPLETED: 70,
    terms.PARTIAL: 10,
    terms.FAILED: 8,
    terms.STOPPED: 7,
    terms.NEEDS_HUMAN: 5,
}
REASONS = {
    terms.COMPLETED: "completed",
    terms.PARTIAL: "loop_detected",
    terms.FAILED: "fatal_error",
    terms.STOPPED: "operator_stop",
    terms.NEEDS_HUMAN: "unknown_commit",
}
WRITE_EVERY = 4  # one task in four made a write through the ledger


def history_days(small: int, large: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """The days (newest, oldest) ago of the small history and of what the large one adds."""
    span = OLDEST_DAY - NEWEST_DAY
    cut = NEWEST_DAY + max(round(span * small / large), 1)
    return (NEWEST_DAY, cut), (cut, OLDEST_DAY)


@dataclass
class Seeded:
    tasks: int
    trace_rows: int
    seconds: float


def growth_agents() -> list[Agent]:
    return [
        Agent.objects.get_or_create(name=f"growth-{n}", defaults={"namespace": f"growth-{n}"})[0]
        for n in range(AGENTS)
    ]


def seed_history(tasks: int, *, newest_day: int, oldest_day: int, seed: int = 43) -> Seeded:
    """Add `tasks` ended tasks with their phases, stop events, trace and ledger rows, created
    from `oldest_day` (excluded) to `newest_day` (included) days ago, as many each day: two
    seedings of days that do not overlap are one history at one daily rate."""
    started = time.perf_counter()
    rng = random.Random(f"{seed}-{Task.objects.count()}")
    agents = growth_agents()
    weights = [1 / (rank + 1) for rank in range(len(agents))]
    states = list(STATES)
    state_weights = list(STATES.values())
    batch = f"growth-{uuid.uuid4().hex[:12]}"
    now = timezone.now()
    today = datetime.combine(now.date(), dtime.min, tzinfo=UTC)
    limits = terms.Limits().to_dict()
    made = 0
    while made < tasks:
        rows = []
        for _ in range(min(BATCH, tasks - made)):
            day = today - timedelta(days=rng.randrange(newest_day, oldest_day))
            created = day + timedelta(seconds=rng.randrange(86400 - 3600))
            state = rng.choices(states, state_weights)[0]
            length = rng.randint(1, MAX_TRACE // 2) * 2
            rows.append(
                Task(
                    id=uuid.UUID(int=rng.getrandbits(128), version=4),
                    agent=rng.choices(agents, weights)[0],
                    goal=f"Reconcile invoice batch {rng.randrange(10**6)} for account "
                    f"{rng.randrange(10**4)}",
                    external_ref=batch,
                    state=state,
                    reason=REASONS[state],
                    limits=limits,
                    initial_limits=limits,
                    deadline_at=created + timedelta(hours=1),
                    model_calls=length // 2,
                    tool_requests=length // 2,
                    tool_executions=length // 2,
                    tokens_used=length * 600,
                    cost_spent=Decimal(length) * Decimal("0.003"),
                    trace_seq=length,
                    revision=length // 4,
                    report={"state": state, "reason": REASONS[state]},
                    ended_at=created + timedelta(seconds=length * 3),
                )
            )
        rows.sort(key=lambda t: t.deadline_at)
        with transaction.atomic():
            created_rows = Task.objects.bulk_create(rows, batch_size=BATCH)
            Phase.objects.bulk_create(
                [
                    Phase(
                        task=t,
                        number=1,
                        ended_at=t.ended_at,
                        end_state=t.state,
                        end_reason=t.reason,
                        report=t.report,
                    )
                    for t in created_rows
                ],
                batch_size=BATCH,
            )
            Operation.objects.bulk_create(
                [
                    Operation(
                        namespace=t.agent.namespace,
                        operation_key=f"{batch}-{t.pk.hex}",
                        tool="send_invoice",
                        fingerprint=t.pk.hex,
                        state=terms.OP_COMMITTED,
                        task=t,
                        claim_seq=2,
                        claimed_at=t.ended_at,
                        committed_at=t.ended_at,
                    )
                    for n, t in enumerate(created_rows)
                    if n % WRITE_EVERY == 0
                ],
                batch_size=BATCH,
            )
        made += len(rows)
    _backdate(batch)
    trace = _seed_trace(batch)
    _seed_rollups(batch)
    return Seeded(tasks=made, trace_rows=trace, seconds=time.perf_counter() - started)


def _backdate(batch: str) -> None:
    """Give the batch's tasks their history's times (`created_at` and `updated_at` are set by
    Django on insert): created an hour before their deadline, last active when they ended."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE agents_task SET created_at = {_later('deadline_at', '-3600')}, "
            "updated_at = ended_at WHERE external_ref = %s",
            [batch],
        )


def _id(pk: uuid.UUID):
    return pk if connection.vendor == "postgresql" else pk.hex


def _json(text: str) -> str:
    return f"CAST('{text}' AS jsonb)" if connection.vendor == "postgresql" else f"'{text}'"


def _later(column: str, seconds: str) -> str:
    """`column` plus `seconds` seconds, as each database adds them."""
    if connection.vendor == "postgresql":
        return f"{column} + ({seconds}) * INTERVAL '1 second'"
    return f"strftime('%%Y-%%m-%%d %%H:%%M:%%f', {column}, ({seconds}) || ' seconds')"


def _seed_trace(batch: str) -> int:
    """Each seeded task's model and tool calls (its `trace_seq` of them, alternating) and its
    stop event, by one INSERT ... SELECT per table."""
    series = (
        "WITH RECURSIVE s(n) AS "
        f"(SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {MAX_TRACE // 2})"
    )
    at = _later("t.created_at", "2 * s.n")
    with connection.cursor() as cursor:
        cursor.execute(
            f"{series} INSERT INTO agents_modelcall (task_id, seq, phase, round, model, decision, "
            "reason, est_prompt_tokens, max_output_tokens, reserved_cost, reserved_tokens, "
            "prompt_tokens, completion_tokens, cost, signature, created_at, settled_at, expired) "
            f"SELECT t.id, 2 * s.n - 1, 1, s.n, 'bench-model', 'ALLOW', '', 500, 200, 1000, 700, "
            f"500, 100, 3000, '', {at}, {at}, FALSE "
            "FROM agents_task t JOIN s ON 2 * s.n <= t.trace_seq WHERE t.external_ref = %s "
            "ORDER BY t.created_at, s.n",
            [batch],
        )
        cursor.execute(
            f"{series} INSERT INTO agents_toolcall (task_id, seq, phase, call_id, tool, args, "
            "effect, operation_key, job_id, fingerprint, args_text, decision, reason, "
            "result_kind, result_code, result_error, result_decision, result_reason, "
            "revision_after, duration_ms, created_at, reported_at) "
            f"SELECT t.id, 2 * s.n, 1, '', 'fetch_page', {_json('{}')}, 'read', '', '', '', '', "
            "'EXECUTE', '', 'SUCCESS', '', '', 'CONTINUE', '', s.n, 120, "
            f"{at}, {at} "
            "FROM agents_task t JOIN s ON 2 * s.n <= t.trace_seq WHERE t.external_ref = %s "
            "ORDER BY t.created_at, s.n",
            [batch],
        )
        cursor.execute(
            "INSERT INTO agents_event (task_id, agent_id, kind, phase, actor, reason, code, "
            "detail, created_at) "
            f"SELECT t.id, t.agent_id, 'task_stopped', 1, 'system:growth', t.reason, '', "
            f"{_json('{}')}, t.ended_at FROM agents_task t WHERE t.external_ref = %s",
            [batch],
        )
    # What the statements inserted (SQLite's row count of an INSERT ... SELECT is -1).
    return Task.objects.filter(external_ref=batch).aggregate(n=Sum("trace_seq"))["n"] or 0


def _seed_rollups(batch: str) -> None:
    """The daily rollups of the seeded days (what `rollup_day` would have built each night)."""
    totals: Counter = Counter()
    calls: Counter = Counter()
    rows = Task.objects.filter(external_ref=batch).values_list(
        "agent_id", "created_at", "model_calls", "cost_spent"
    )
    for agent_id, created, model_calls, cost in rows.iterator(chunk_size=BATCH):
        key = (created.date(), agent_id)
        calls[key] += model_calls
        totals[key] += cost
    # Each seeding covers days no other one did (`seed_history`): only new rows.
    DailyRollup.objects.bulk_create(
        [
            DailyRollup(day=day, agent_id=agent_id, model_calls=n, tool_executions=n,
                        tokens=n * 600, cost=totals[(day, agent_id)])
            for (day, agent_id), n in calls.items()
        ],
        batch_size=BATCH,
    )  # fmt: skip


# -- timing -----------------------------------------------------------------------------------


def timed_ms(call: Callable[[], object], repeat: int) -> list[float]:
    call()  # warm: the first run pays for plans and caches the others share
    spent = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        spent.append((time.perf_counter() - started) * 1000)
    return spent


PRUNE_DAYS = NEWEST_DAY + 7  # the prune batch's retention: most of either history is past it
PRUNE_TASKS = 200  # tasks a measured prune batch takes (`retention.TASKS_PER_ROUND` at most)
LIVE_TASKS = 50  # today's work, the same at every size


@dataclass
class Measured:
    """Median milliseconds by item, and the fastest run of each (on a machine other work
    shares, that work only adds time: the fastest run is the least disturbed); the longest
    transaction of the prune batches, and the longest its mark held task rows."""

    ms: dict[str, float]
    prune_longest_ms: float
    prune_mark_ms: float
    least: dict[str, float] = field(default_factory=dict)


class Probe:
    """An operator signed in to the console and holding an API token, and an agent's token: the
    clients the timed requests go through (Django's test client: the view, its queries and its
    template, without a network or a web server's own time)."""

    def __init__(self) -> None:
        from django.contrib.auth import get_user_model
        from django.test import Client

        from agents.models import ApiToken

        user, created = get_user_model().objects.get_or_create(
            username="growth-operator", defaults={"is_superuser": True, "is_staff": True}
        )
        raw, key_hash, prefix = ApiToken.generate()
        ApiToken.objects.create(user=user, key_hash=key_hash, prefix=prefix, name="growth")
        self.console = Client(HTTP_HOST="localhost")
        self.console.force_login(user)
        self.operator = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {raw}")
        agent = growth_agents()[0]
        raw, key_hash, prefix = ApiToken.generate()
        ApiToken.objects.create(agent=agent, key_hash=key_hash, prefix=prefix, name="growth")
        self.agent = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {raw}")

    def get(self, client, path: str) -> None:
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
        if getattr(response, "streaming", False):
            b"".join(response.streaming_content)

    def decision(self) -> float:
        """One model-call gate on a task created just before it (not timed)."""
        created = self.agent.post(
            "/api/v1/tasks", {"goal": "a fresh task"}, content_type="application/json"
        )
        assert created.status_code == 201, created.content
        task_id = created.json()["id"]
        started = time.perf_counter()
        answer = self.agent.post(
            f"/api/v1/tasks/{task_id}/model-calls", {}, content_type="application/json"
        )
        spent = (time.perf_counter() - started) * 1000
        assert answer.status_code == 200, answer.content
        return spent


def seed_today() -> None:
    """Today's work: `LIVE_TASKS` running tasks with a few decisions each, one with a write in
    flight whose lease is over (the reconcile queue and the lease sweep have something)."""
    from agents.services import runner
    from agents.services.tasks import task_create

    agent = growth_agents()[1]
    for n in range(LIVE_TASKS):
        task = task_create(agent=agent, goal=f"today's work {n}")
        runner.model_call_gate(task_id=task.pk, agent=agent, model="bench-model")
        runner.tool_call_request(
            task_id=task.pk, agent=agent, tool="fetch_page", args={"page": n}, effect=terms.READ
        )
        if n == 0:
            runner.tool_call_request(
                task_id=task.pk, agent=agent, tool="send_invoice", args={"n": n},
                effect=terms.WRITE, operation_key=f"today-{uuid.uuid4().hex}",
            )  # fmt: skip


def measure(probe: Probe, *, repeat: int) -> Measured:
    """Every page, list and job of the growth phase, `repeat` times each (median)."""
    from agents import jobs
    from agents.api.pagination import _micros
    from agents.services import retention, sweeps

    # The newest task of the history (today's tasks may end meanwhile, by the deadline sweep).
    newest = Task.objects.filter(external_ref__startswith="growth-").order_by("-created_at").first()
    deep = Task.objects.order_by("-created_at", "-pk")[max(Task.objects.count() * 9 // 10, 0) :][
        :1
    ].first()
    cursor = f"{_micros(deep.created_at)}.{deep.pk.hex}" if deep else ""
    words = newest.goal.split()[3] if newest else "x"  # its batch number: a rare word
    pages = {
        "dashboard": "/",
        "task list API, first page": "/api/v1/tasks?limit=50",
        "task list API, deep cursor": f"/api/v1/tasks?limit=50&cursor={cursor}",
        "task page": f"/tasks/{newest.pk}/" if newest else "/",
        "reconcile queue": "/reconcile/",
        "daily report": "/reports/daily/?days=30",
        "daily report CSV": "/reports/daily.csv?days=30",
        "search": f"/?q={words}",
    }
    runs: dict[str, list[float]] = {}
    for name, path in pages.items():
        client = probe.operator if path.startswith("/api/") else probe.console
        runs[name] = timed_ms(lambda c=client, p=path: probe.get(c, p), repeat)
    runs["rollup job (today, yesterday)"] = timed_ms(jobs.rollup_daily, repeat)
    runs["lease sweep"] = timed_ms(sweeps.sweep_leases, repeat)
    runs["deadline sweep"] = timed_ms(sweeps.sweep_deadlines, repeat)
    # A prune batch is destructive: each run takes the next oldest tasks (as the job would).
    longest = mark = 0.0
    spent = []
    for _ in range(max(repeat // 2, 1)):
        result = retention.PruneResult(cutoff=retention.cutoff_of(PRUNE_DAYS))
        ids = list(
            retention.prunable_tasks(result.cutoff).values_list("pk", flat=True)[:PRUNE_TASKS]
        )
        started = time.perf_counter()
        retention.prune_round(ids, cutoff=result.cutoff, now=timezone.now(), result=result)
        spent.append((time.perf_counter() - started) * 1000)
        longest = max(longest, result.longest_transaction_ms)
        mark = max(mark, result.longest_mark_ms)
    runs[f"prune batch ({PRUNE_TASKS} tasks)"] = spent
    probe.decision()  # warm
    # A decision takes 2-3 ms: its median over 21 runs moved by a quarter between two runs of
    # the same code on a quiet machine, more than the 1.1x it is held to; 105 runs cost 1 s.
    runs["one decision on a fresh task"] = [probe.decision() for _ in range(repeat * 15)]
    return Measured(
        ms={name: statistics.median(spent) for name, spent in runs.items()},
        least={name: min(spent) for name, spent in runs.items()},
        prune_longest_ms=longest,
        prune_mark_ms=mark,
    )


def analyze() -> None:
    """What autovacuum does after a bulk insert (PostgreSQL 13+ vacuums insert-only tables):
    statistics, the visibility map (index-only scans) and the block ranges of the BRIN indexes
    summarized. Without it the first timings measured a state no live database stays in.
    (Only ANALYZE inside a transaction, as in a test: VACUUM cannot run there.)

    Then a CHECKPOINT: the seed's dirty pages written out before anything is timed. A year's
    history was written long ago; without it the checkpointer was still flushing the large
    seed's gigabytes while the large size was timed (on a quiet machine every page read
    1.7-2.2x, the decision 1.29x). Skipped where the role may not (superuser or
    pg_checkpoint)."""
    with connection.cursor() as cursor:
        vacuum = connection.vendor == "postgresql" and not connection.in_atomic_block
        cursor.execute("VACUUM ANALYZE" if vacuum else "ANALYZE")
        if vacuum:
            # No right to: timed with the checkpointer busy, as before.
            with contextlib.suppress(DatabaseError):
                cursor.execute("CHECKPOINT")
