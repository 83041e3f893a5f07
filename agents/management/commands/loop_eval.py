"""`manage.py loop_eval`: precision, recall and stop step of the loop detectors by threshold.

Replays labelled traces through the guard core (`agents.loop_eval`): the set shipped in
agents/loop_eval/traces/ by default, or with --from-db the tasks operators labelled in the
console ("real loop" / "false stop"). Prints one row per detector and threshold, writes a
precision-recall chart (SVG) and names the recommended near_duplicate_threshold.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import loop_eval
from agents.selectors import labelled_traces


class Command(BaseCommand):
    help = "Replay labelled traces through the guard and recommend a near-duplicate threshold."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--traces", type=Path, default=loop_eval.TRACES_DIR, help="folder of *.json traces"
        )
        parser.add_argument(
            "--from-db", action="store_true", help="use the stops operators labelled instead"
        )
        parser.add_argument(
            "--chart",
            type=Path,
            default=Path(settings.DATA_DIR) / "loop_eval.svg",
            help="where to write the precision-recall chart (SVG)",
        )

    def handle(self, *args, **options) -> None:
        if options["from_db"]:
            traces = labelled_traces()
            source = "labelled tasks in the database"
        else:
            traces = loop_eval.load_traces(options["traces"])
            source = str(options["traces"])
        if not traces:
            raise CommandError(f"No labelled traces in {source}.")
        loops = sum(1 for t in traces if t.label == "loop")
        self.stdout.write(
            f"{len(traces)} traces from {source}: {loops} loops, {len(traces) - loops} legitimate"
        )
        rows = loop_eval.evaluate(traces)
        best = loop_eval.recommend(rows)
        self.stdout.write(loop_eval.table(rows))
        chart: Path = options["chart"]
        chart.parent.mkdir(parents=True, exist_ok=True)
        chart.write_text(loop_eval.chart_svg(rows, best))
        self.stdout.write(f"chart: {chart}")
        if best is None:
            self.stdout.write("recommended threshold: none (every threshold stops a legit trace)")
            return
        self.stdout.write(
            f"recommended near_duplicate_threshold (lexical): {best.threshold:.2f} "
            f"(precision {best.precision:.2f}, recall {best.recall:.2f}, "
            f"max stop step {best.max_stop})"
        )
        missed = [r.trace.name for r in best.replays if r.trace.label == "loop" and not r.stopped]
        if missed:
            self.stdout.write(f"loops it does not stop: {', '.join(missed)}")
