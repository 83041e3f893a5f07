from __future__ import annotations

from datetime import date, timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from agents.services.rollups import rollup_day


class Command(BaseCommand):
    help = (
        "Rebuild the daily report rows of a UTC day (default: today). Idempotent. A day whose "
        "trace retention pruned keeps its rows: they are all that is left of it."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--date", dest="day", default=None, help="the day, YYYY-MM-DD (default: today)"
        )
        parser.add_argument(
            "--days", type=int, default=1, help="also rebuild this many days before it, in all"
        )

    def handle(self, *args, day: str | None, days: int, **options):
        if days < 1:
            raise CommandError("--days must be 1 or more")
        try:
            last = date.fromisoformat(day) if day else timezone.now().date()
        except ValueError:
            raise CommandError(f"--date {day!r} is not a date (use YYYY-MM-DD)") from None
        if days - 1 > (last - date.min).days:
            raise CommandError(f"--days {days}: no day comes before {date.min.isoformat()}")
        for offset in range(days - 1, -1, -1):
            one = last - timedelta(days=offset)
            self.stdout.write(f"{one.isoformat()}: {rollup_day(day=one)} row(s)")
