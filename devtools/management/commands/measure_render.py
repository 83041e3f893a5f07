"""`manage.py measure_render`: how long the console takes to answer, server side.

Builds a throw-away task with a long trace (by default 2,000 rows: model calls and tool calls,
with repeats and a cycle in it, like a real loop), renders the console pages for it through
Django's full request stack (middleware, view, queries, templates) several times, prints the
timings, and rolls everything back: nothing it creates is left in the database.

The figure is a measurement, not a test: it depends on the machine and the database.
"""

from __future__ import annotations

import statistics
import time
import uuid
from datetime import timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from agents.guard import terms
from agents.models import Agent, Event, EventKind, ModelCall, Phase, Task, ToolCall
from ledger.models import Operation

BUDGET_MS = 200


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Time the console pages for a task with a long trace (default 2,000 rows); no data kept."

    def add_arguments(self, parser):
        parser.add_argument("--rows", type=int, default=2000, help="trace rows of the task")
        parser.add_argument("--runs", type=int, default=20, help="requests per page")

    def handle(self, *args, rows: int, runs: int, **options):
        if rows < 1 or runs < 1:
            raise CommandError("--rows and --runs must be at least 1")
        self.results: list[tuple[str, list[float], int]] = []
        try:
            with transaction.atomic(), override_settings(ALLOWED_HOSTS=["*"], DEBUG=False):
                task = self.build_task(rows)
                client = Client()
                client.force_login(self.build_admin())
                pages = [
                    (f"task detail ({rows:,} trace rows)", f"/tasks/{task.pk}/"),
                    ("task detail, first trace page", f"/tasks/{task.pk}/?trace=1"),
                    ("trace page (htmx partial)", f"/tasks/{task.pk}/timeline/?page=2"),
                    ("task live poll (htmx partial)", f"/tasks/{task.pk}/live/"),
                    ("dashboard", "/"),
                    ("dashboard poll (htmx partial)", "/?page=1"),
                    ("reconcile queue", "/reconcile/"),
                    ("audit log", "/audit/?everyone=on"),
                ]
                for label, url in pages:
                    htmx = "htmx" in label
                    self.measure(client, label, url, runs, htmx=htmx)
                raise _Rollback
        except _Rollback:
            pass
        self.report(rows, runs)

    # -- data ------------------------------------------------------------------------------

    def build_admin(self):
        return get_user_model().objects.create_superuser(
            f"measure-{uuid.uuid4().hex[:8]}", password=None
        )

    def build_task(self, rows: int) -> Task:
        now = timezone.now()
        agent = Agent.objects.create(name=f"measure-{uuid.uuid4().hex[:8]}", namespace="measure")
        task = Task.objects.create(
            agent=agent,
            goal="Reconcile the invoices of March (measurement task with a long trace)",
            limits={**terms.Limits(max_model_calls=5000, max_tool_requests=5000,
                               max_tool_executions=5000, max_stagnant=5000).to_dict()},
            deadline_at=now + timedelta(hours=2),
            state=terms.NEEDS_HUMAN,
            reason="unknown_commit",
            phase=2,
            trace_seq=rows,
            model_calls=rows // 2,
            tool_requests=rows - rows // 2,
            tool_executions=rows - rows // 2,
            tokens_used=1200 * (rows // 2),
            cost_spent=Decimal("0.004") * (rows // 2),
            report={"state": terms.NEEDS_HUMAN, "reason": "unknown_commit", "code": "GUARD_LEDGER",
                    "resume_condition": "Reconcile operation pay-42, then an operator may resume."},
        )  # fmt: skip
        Phase.objects.create(task=task, number=1, reason="created")
        Phase.objects.create(task=task, number=2, reason="resumed for the measurement")
        model_rows, tool_rows = [], []
        tools = ["search_invoices", "get_invoice", "search_invoices", "check_ledger"]
        for seq in range(1, rows + 1):
            phase = 1 if seq <= rows // 2 else 2
            if seq % 2:
                model_rows.append(ModelCall(
                    task=task, seq=seq, phase=phase, round=seq // 2 + 1, model="sim-model",
                    decision=terms.ALLOW, prompt_tokens=1000, completion_tokens=200,
                    cost=Decimal("0.004"), settled_at=now, signature=f"{seq % 5:064x}",
                    tool_calls=[{"name": tools[seq % 4], "args": {"page": seq % 9}}],
                ))  # fmt: skip
            else:
                tool = tools[seq % 4]
                args = {"query": f"march invoices page {seq % 9}", "api_key": "secret",
                        "filters": {"status": "open", "note": "x" * 120}}  # fmt: skip
                tool_rows.append(ToolCall(
                    task=task, seq=seq, phase=phase, tool=tool, args=args, effect=terms.READ,
                    fingerprint=f"{(seq % 9) * 7919 + len(tool):064x}", decision=terms.EXECUTE,
                    result_kind=terms.SUCCESS, result_decision=terms.CONTINUE,
                    revision_after=seq // 400,
                    reported_at=now,
                ))  # fmt: skip
        ModelCall.objects.bulk_create(model_rows, batch_size=500)
        ToolCall.objects.bulk_create(tool_rows, batch_size=500)
        last = ToolCall.objects.filter(task=task).order_by("-seq").first()
        operation = Operation.objects.create(
            namespace="measure", operation_key="pay-42", tool="pay_invoice", fingerprint="f" * 64,
            args={"invoice": "INV-42", "card_number": "4111"}, state=terms.UNKNOWN, task=task,
            claim_seq=last.seq, claimed_at=now,
        )  # fmt: skip
        ToolCall.objects.filter(pk=last.pk).update(operation=operation, effect=terms.WRITE)
        Event.objects.bulk_create([
            Event(task=task, agent=agent, kind=EventKind.GUARD_TRIGGER, phase=1,
                  actor="system:guard", reason="same_call", code="GUARD_LOOP_DETECTED",
                  detail={"decision": "BLOCK"})
            for _ in range(40)
        ])  # fmt: skip
        return task

    # -- timing ----------------------------------------------------------------------------

    def measure(self, client: Client, label: str, url: str, runs: int, *, htmx: bool) -> None:
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        response = client.get(url, **headers)  # warm-up: template compilation, caches
        if response.status_code != 200:
            raise CommandError(f"{url} answered {response.status_code}")
        timings = []
        with CaptureQueriesContext(connection) as queries:
            for _ in range(runs):
                start = time.perf_counter()
                client.get(url, **headers)
                timings.append((time.perf_counter() - start) * 1000)
        self.results.append((label, timings, len(queries.captured_queries) // runs))

    def report(self, rows: int, runs: int) -> None:
        vendor = connection.vendor
        self.stdout.write(f"Console server time, {runs} requests per page, database: {vendor}")
        self.stdout.write(f"{'page':<36} {'median':>9} {'p95':>9} {'max':>9} {'queries':>8}")
        for label, timings, queries in self.results:
            ordered = sorted(timings)
            p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
            self.stdout.write(
                f"{label:<36} {statistics.median(timings):>7.1f}ms {p95:>7.1f}ms "
                f"{max(timings):>7.1f}ms {queries:>8}"
            )
        label, timings, _ = self.results[0]
        median = statistics.median(timings)
        verdict = "within" if median < BUDGET_MS else "OVER"
        self.stdout.write(
            f"task detail with {rows:,} trace rows: median {median:.1f} ms ({verdict} the "
            f"{BUDGET_MS} ms budget)"
        )
