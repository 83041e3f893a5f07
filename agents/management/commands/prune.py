from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.services.retention import MIN_DAYS, cutoff_of, trace_prune


class Command(BaseCommand):
    help = (
        "Remove the trace rows, events and seen hashes of tasks that ended more than N days "
        "ago (default: RETENTION_DAYS). The ledger, the audit log, stop reports, counters and "
        "daily rollups are kept."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--days", type=int, default=None, help="keep this many days (2 or more)"
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would be removed, remove nothing"
        )
        parser.add_argument("--max-tasks", type=int, default=None, help="prune at most this many")

    def handle(self, *args, days: int | None, dry_run: bool, max_tasks: int | None, **options):
        days = settings.RETENTION_DAYS if days is None else days
        if days < MIN_DAYS:
            # As RETENTION_DAYS: the rollup job rebuilds yesterday from the trace.
            raise CommandError(
                f"retention is off (RETENTION_DAYS=0): pass --days N, N {MIN_DAYS} or more"
                if days == settings.RETENTION_DAYS == 0
                else f"--days {days}: keep {MIN_DAYS} or more days (the rollup job rebuilds "
                "yesterday from the trace)"
            )
        if max_tasks is not None and max_tasks < 1:
            raise CommandError("--max-tasks must be 1 or more")
        try:
            cutoff_of(days)
        except OverflowError:
            raise CommandError(f"--days {days}: more days than the calendar holds") from None
        result = trace_prune(days=days, dry_run=dry_run, max_tasks=max_tasks)
        verb = "would remove" if dry_run else "removed"
        self.stdout.write(
            f"tasks ended before {result.cutoff.isoformat(timespec='seconds')}: "
            f"{result.tasks} task(s) {'to prune' if dry_run else 'pruned'}"
        )
        for table in ("tool_calls", "model_calls", "seen_hashes", "request_answers", "events"):
            self.stdout.write(f"  {table}: {verb} {result.rows.get(table, 0)}")
        if not dry_run:
            self.stdout.write(f"  longest transaction: {result.longest_transaction_ms:.1f} ms")
