"""`manage.py bench_growth`: the growth phase of `manage.py bench` (devtools/growth.py), run on
the database of this process (the bench runs it on a database of its own)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from devtools import growth

PAGE_TARGET = 1.5
DECISION_TARGET = 1.1


class Command(BaseCommand):
    help = "Seed a large history and time pages, lists and jobs at a small and a large size."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--growth-size", type=int, default=200_000, help="ended tasks, large")
        parser.add_argument(
            "--small-size", type=int, default=0, help="ended tasks, small (default: 1/10)"
        )
        parser.add_argument("--repeat", type=int, default=7, help="timed runs per item (median)")

    def handle(self, *args: Any, growth_size: int, small_size: int, repeat: int, **opts: Any):
        small = small_size or max(growth_size // 10, 1)
        if growth_size < 2 or not 0 < small < growth_size or repeat < 1:
            raise CommandError("--growth-size above --small-size above 0, --repeat 1 or more")
        growth.seed_today()
        probe = growth.Probe()
        sizes, timings = [], []
        days = growth.history_days(small, growth_size)
        for tasks, (newest, oldest) in zip((small, growth_size - small), days, strict=True):
            seeded = growth.seed_history(tasks, newest_day=newest, oldest_day=oldest)
            sizes.append(seeded)
            self.say(f"seeded {seeded.tasks} tasks, {seeded.trace_rows} trace rows in "
                     f"{seeded.seconds:.1f} s; VACUUM ANALYZE, then timing")  # fmt: skip
            growth.analyze()
            started = time.perf_counter()
            timings.append(growth.measure(probe, repeat=repeat))
            self.say(f"timed in {time.perf_counter() - started:.1f} s")
        self.report(sizes, timings)

    def say(self, text: str) -> None:
        self.stderr.write(f"bench growth: {text}")

    def report(self, sizes: list[growth.Seeded], timings: list[growth.Measured]) -> None:
        out = self.stdout.write
        tasks = [sizes[0].tasks, sizes[0].tasks + sizes[1].tasks]
        rows = [sizes[0].trace_rows, sizes[0].trace_rows + sizes[1].trace_rows]
        seconds = sum(s.seconds for s in sizes)
        out(f"growth phase on {connection.vendor}: history of {tasks[0]:,} then {tasks[1]:,} "
            f"ended tasks ({rows[0]:,} then {rows[1]:,} trace rows), seeded at "
            f"{tasks[1] / seconds:,.0f} tasks/s and {rows[1] / seconds:,.0f} trace rows/s; "
            f"medians of each item; the last column: the ratio of the fastest runs (work that "
            f"shares the machine only adds time)")  # fmt: skip
        out(f"{'':36}{'small ms':>10}{'large ms':>10}{'ratio':>8}  target{'fastest':>16}")
        small, large = timings
        for name, ms in small.ms.items():
            target = DECISION_TARGET if name.startswith("one decision") else PAGE_TARGET
            ratio = large.ms[name] / ms if ms else float("nan")
            least = small.least[name]
            fastest = large.least[name] / least if least else float("nan")
            verdict = "ok" if ratio <= target else "OVER"
            out(f"{name:36}{ms:10.1f}{large.ms[name]:10.1f}{ratio:8.2f}  <= {target} "
                f"{verdict:4}{fastest:10.2f}")  # fmt: skip
        out(f"prune batch: longest delete transaction {small.prune_longest_ms:.1f} ms small, "
            f"{large.prune_longest_ms:.1f} ms large (it locks only ended tasks' trace rows); "
            f"task rows held by the mark at most {small.prune_mark_ms:.1f} ms small, "
            f"{large.prune_mark_ms:.1f} ms large (target: under 50 ms)")  # fmt: skip
