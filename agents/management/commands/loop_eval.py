"""`manage.py loop_eval`: precision, recall and stop step of the loop detectors by provider and
threshold.

Replays labelled traces through the guard core (`agents.loop_eval`). By default the shipped
set: each provider's threshold is chosen on its tuning part (agents/loop_eval/traces/tuning/)
and the table printed is the held-out part's (agents/loop_eval/traces/heldout/), so the
recommendation is judged on traces the choice never saw. With --traces a folder of your own,
or with --from-db the tasks operators labelled in the console ("real loop" / "false stop"),
the table and the choice are on that one set. --export-labels FILE writes those labelled
tasks as a trace file, to add to the set. Writes a precision-recall chart (SVG).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import loop_eval
from agents.selectors import labelled_traces, redactor


class Command(BaseCommand):
    help = "Replay labelled traces through the guard and recommend a near-duplicate threshold."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--traces", type=Path, default=None, help="a folder of *.json traces (one set)"
        )
        parser.add_argument(
            "--from-db", action="store_true", help="use the stops operators labelled instead"
        )
        parser.add_argument(
            "--export-labels",
            type=Path,
            default=None,
            metavar="FILE",
            help="write the tasks operators labelled as a trace file (JSON) and stop",
        )
        parser.add_argument(
            "--chart",
            type=Path,
            default=Path(settings.DATA_DIR) / "loop_eval.svg",
            help="where to write the precision-recall chart (SVG)",
        )

    def handle(self, *args, **options) -> None:
        if options["export_labels"] is not None:
            self._export(options["export_labels"])
            return
        if options["from_db"] or options["traces"] is not None:
            self._one_set(options)
            return
        tuning = loop_eval.load_traces(loop_eval.TUNING_DIR)
        heldout = loop_eval.load_traces(loop_eval.HELDOUT_DIR)
        self.stdout.write(
            f"{len(tuning) + len(heldout)} traces from {loop_eval.TRACES_DIR}: "
            f"tuning {self._counts(tuning)}; held-out {self._counts(heldout)}"
        )
        self.stdout.write(f"providers: {', '.join(loop_eval.providers())}")
        tuned = loop_eval.evaluate(tuning)
        judged = loop_eval.evaluate(heldout)
        self.stdout.write("held-out part (each threshold replayed on traces tuning never saw):")
        self.stdout.write(loop_eval.table(judged))
        picks = []
        for provider in loop_eval.providers():
            chosen = self._recommended(tuned, provider, "a legitimate tuning trace")
            if chosen is None:
                continue
            row = loop_eval.row_at(judged, provider, chosen.threshold)
            assert row is not None
            picks.append(row)
            self.stdout.write(
                f"recommended near_duplicate_threshold ({provider}): {row.threshold:.2f} "
                f"(chosen on tuning; held-out precision {row.precision:.2f}, recall "
                f"{row.recall:.2f}, tp {row.tp}, fp {row.fp}, nudged {row.nudged})"
            )
        best = loop_eval.best_provider(picks)
        self._chart(options["chart"], judged, best)
        if best is not None:
            self.stdout.write(
                f"recommended provider: {best.detector} at {best.threshold:.2f} "
                f"(held-out precision {best.precision:.2f}, recall {best.recall:.2f})"
            )

    @staticmethod
    def _counts(traces: list[loop_eval.Trace]) -> str:
        loops = sum(1 for t in traces if t.label == "loop")
        return f"{len(traces)} ({loops} loops, {len(traces) - loops} legitimate)"

    def _export(self, path: Path) -> None:
        traces = labelled_traces()
        if not traces:
            raise CommandError("No labelled tasks in the database: label stops in the console.")
        path.parent.mkdir(parents=True, exist_ok=True)
        # The file is meant for the repository: masked as the console shows it, by each tool's
        # redaction policy (replays judge the shape of calls, not their secrets).
        masks = redactor(operator=True)
        for trace in traces:
            for call in trace.calls:
                call["args"] = masks.apply(call["args"], call["tool"])
                if "data" in call:
                    call["data"] = masks.apply(call["data"], call["tool"])
                if "job_id" in call:
                    call["job_id"] = masks.text(call["job_id"])
        rows = [asdict(t) for t in traces]
        path.write_text(json.dumps(rows, indent=1, ensure_ascii=False, default=str) + "\n")
        self.stdout.write(f"{len(traces)} labelled traces written to {path}")

    def _one_set(self, options) -> None:
        if options["from_db"]:
            traces = labelled_traces()
            source = "labelled tasks in the database"
        else:
            try:
                traces = loop_eval.load_traces(options["traces"])
            except loop_eval.TraceFileError as exc:
                raise CommandError(str(exc)) from None
            source = str(options["traces"])
        if not traces:
            raise CommandError(f"No labelled traces in {source}.")
        self.stdout.write(f"{len(traces)} traces from {source}: {self._counts(traces)}")
        rows = loop_eval.evaluate(traces)
        self.stdout.write(loop_eval.table(rows))
        picks = []
        for provider in loop_eval.providers():
            best = self._recommended(rows, provider, "a legitimate trace")
            if best is None:
                continue
            picks.append(best)
            self.stdout.write(
                f"recommended near_duplicate_threshold ({provider}): {best.threshold:.2f} "
                f"(precision {best.precision:.2f}, recall {best.recall:.2f}, "
                f"max stop step {best.max_stop})"
            )
            missed = [
                r.trace.name for r in best.replays if r.trace.label == "loop" and not r.stopped
            ]
            if missed:
                self.stdout.write(f"loops it does not stop: {', '.join(missed)}")
        self._chart(options["chart"], rows, loop_eval.best_provider(picks))

    def _recommended(
        self, rows: list[loop_eval.Row], provider: str, stopped: str
    ) -> loop_eval.Row | None:
        """The provider's recommended row of `rows`, or None, said so (every threshold stops
        `stopped`)."""
        best = loop_eval.recommend(rows, provider)
        if best is None:
            self.stdout.write(
                f"recommended near_duplicate_threshold ({provider}): none "
                f"(every threshold stops {stopped})"
            )
        return best

    def _chart(self, chart: Path, rows: list[loop_eval.Row], best: loop_eval.Row | None) -> None:
        chart.parent.mkdir(parents=True, exist_ok=True)
        chart.write_text(loop_eval.chart_svg(rows, best))
        self.stdout.write(f"chart: {chart}")
