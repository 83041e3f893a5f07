"""Replaying labelled traces through the guard core to tune the near-duplicate threshold.

A trace is what an agent asked, call by call, and a label: `loop` (the task should stop) or
`legit` (it must not). Each trace is replayed through `agents.guard.core` exactly as the
service would run it, with loose budgets so that only the loop rules (same_call, short_cycle,
near_duplicate) can stop it: the question is what the detector does, not when money runs out.

The shipped set is split in two parts fixed in the repository: `traces/tuning/` (where a
threshold may be chosen) and `traces/heldout/` (where it is judged; its topics never appear in
tuning, see `make_set`). Each provider is replayed at each threshold: `lexical` (built in) and
`semantic` (the embedded model of the `loopwarden[semantic]` extra, `agents.semantic`).

Pure Python like the core (no Django import): the management command `loop_eval` reads the
shipped traces (or labelled stops from the database), calls `evaluate` and prints the table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from agents import semantic
from agents.guard import core, terms
from agents.guard.similarity import LEXICAL, SEMANTIC

TRACES_DIR = Path(__file__).resolve().parent / "traces"
TUNING_DIR = TRACES_DIR / "tuning"
HELDOUT_DIR = TRACES_DIR / "heldout"
LOOP_REASONS = ("same_call", "short_cycle", "near_duplicate")
__all__ = ["LEXICAL", "SEMANTIC"]  # re-exported for the command and the report
THRESHOLDS = tuple(round(0.40 + 0.05 * i, 2) for i in range(12)) + (0.97,)  # 0.40 .. 0.97
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


@dataclass
class Trace:
    name: str
    label: str  # "loop" | "legit"
    kind: str
    calls: list[dict[str, Any]]


@dataclass
class Replay:
    """What the guard did with one trace: the call that stopped it (1-based) and why."""

    trace: Trace
    stop_step: int | None = None
    reason: str | None = None
    blocks: list[int] = field(default_factory=list)

    @property
    def stopped(self) -> bool:
        return self.reason in LOOP_REASONS


@dataclass
class Row:
    detector: str
    threshold: float | None
    precision: float
    recall: float
    tp: int
    fp: int
    fn: int
    mean_stop: float | None
    max_stop: int | None
    replays: list[Replay]
    nudged: int = 0  # legitimate traces that got a BLOCK without being stopped


def providers() -> tuple[str, ...]:
    """The providers this installation can replay: semantic needs its extra."""
    return (LEXICAL, SEMANTIC) if semantic.available() else (LEXICAL,)


class TraceFileError(ValueError):
    """A trace file that is not a list of traces, each named, labelled loop or legit."""


LABELS = ("loop", "legit")


def load_traces(directory: Path = TRACES_DIR) -> list[Trace]:
    """The traces of every *.json under `directory` (its parts' folders too)."""
    traces = []
    for path in sorted(directory.rglob("*.json")):
        try:
            rows = json.loads(path.read_text())
            for raw in rows:
                trace = Trace(raw["name"], raw["label"], raw.get("kind", ""), raw["calls"])
                # A label spelled otherwise would count as legitimate work, silently.
                if trace.label not in LABELS or not isinstance(trace.calls, list):
                    raise TraceFileError(f"trace {trace.name!r}: label loop or legit, calls a list")
                traces.append(trace)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            why = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
            raise TraceFileError(
                f"{path}: not a list of traces (name, label loop or legit, calls): {why}"
            ) from None
    return traces


def eval_limits(threshold: float | None) -> terms.Limits:
    """Today's loop rules with their defaults; every budget loose enough never to fire."""
    return terms.Limits(
        max_model_calls=10_000, max_tool_requests=10_000, max_tool_executions=10_000,
        max_stagnant=10_000, max_retries=10_000, max_polls=10_000, deadline_seconds=86_400,
        max_tokens=10**9, max_cost=Decimal("1000000"), near_duplicate_threshold=threshold,
    )  # fmt: skip


def trace_vectors(trace: Trace) -> dict[str, Sequence[float]]:
    """The semantic vectors of every call of a trace, by fingerprint (computed before the
    replay, as the service computes them before it locks the task row)."""
    calls = {}
    for call in trace.calls:
        req = terms.ToolRequest(tool=call["tool"], args=call.get("args") or {},
                                ignore_fields=call.get("ignore_fields") or [])  # fmt: skip
        fp, text = req.identity
        calls[fp] = text
    return semantic.vectors(calls)


def replay(
    trace: Trace,
    threshold: float | None,
    provider: str = LEXICAL,
    vectors: Mapping[str, Sequence[float]] | None = None,
) -> Replay:
    limits = eval_limits(threshold)
    task = terms.TaskState(
        state=terms.RUNNING, phase=1, limits=limits,
        deadline_at=NOW + timedelta(seconds=limits.deadline_seconds),
    )  # fmt: skip
    agent = terms.AgentView()
    out = Replay(trace)
    for step, call in enumerate(trace.calls, start=1):
        req = terms.ToolRequest(
            tool=call["tool"], args=call.get("args") or {}, job_id=call.get("job_id"),
            ignore_fields=call.get("ignore_fields") or [], similarity_provider=provider,
        )  # fmt: skip
        req.vectors = vectors or {}
        asked = core.request_tool(task, req, None, agent, NOW)
        if asked.decision == terms.BLOCK:
            out.blocks.append(step)
            continue
        if asked.decision == terms.STOP:
            out.stop_step, out.reason = step, asked.reason
            return out
        fp, text = req.identity
        view = terms.ToolCallView(tool=req.tool, effect=terms.READ, fingerprint=fp, args_text=text,
                              job_id=req.job_id)  # fmt: skip
        result = terms.ToolResult(
            kind=call.get("kind", terms.SUCCESS), data=call.get("data"),
            job_id=call.get("job_id"), wait_ms=call.get("wait_ms"),
            evidence=call.get("evidence"),
        )  # fmt: skip
        answered = core.report_result(task, view, result, NOW)
        if answered.decision == terms.STOP:
            out.stop_step, out.reason = step, answered.reason
            return out
    return out


def score(
    detector: str,
    threshold: float | None,
    traces: list[Trace],
    vectors: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
) -> Row:
    provider = LEXICAL if detector == "exact" else detector
    replays = [
        replay(trace, threshold, provider, (vectors or {}).get(trace.name)) for trace in traces
    ]
    tp = sum(1 for r in replays if r.stopped and r.trace.label == "loop")
    fp = sum(1 for r in replays if r.stopped and r.trace.label != "loop")
    fn = sum(1 for r in replays if not r.stopped and r.trace.label == "loop")
    steps = [r.stop_step for r in replays if r.stopped and r.trace.label == "loop" and r.stop_step]
    return Row(
        detector=detector, threshold=threshold,
        precision=tp / (tp + fp) if tp + fp else 1.0, recall=tp / (tp + fn) if tp + fn else 0.0,
        tp=tp, fp=fp, fn=fn, mean_stop=sum(steps) / len(steps) if steps else None,
        max_stop=max(steps) if steps else None, replays=replays,
        nudged=sum(1 for r in replays if r.trace.label != "loop" and r.blocks and not r.stopped),
    )  # fmt: skip


def evaluate(
    traces: list[Trace], thresholds=THRESHOLDS, provider_names: tuple[str, ...] | None = None
) -> list[Row]:
    """The exact rules alone (no threshold: today's behaviour), then each provider at each
    threshold."""
    names = providers() if provider_names is None else provider_names
    vectors = {t.name: trace_vectors(t) for t in traces} if SEMANTIC in names else {}
    rows = [score("exact", None, traces)]
    for name in names:
        rows += [score(name, t, traces, vectors) for t in thresholds]
    return rows


def recommend(rows: list[Row], detector: str = LEXICAL) -> Row | None:
    """The provider's threshold that stops (or nudges) no legitimate trace and the most loops,
    soonest; meant for the tuning part's rows, then judged on the held-out part.

    Among ties the highest threshold wins: the further from the legitimate traces, the less a
    new kind of legitimate work is likely to be caught.
    """
    clean = [r for r in rows if r.detector == detector and r.fp == 0 and r.nudged == 0]
    if not clean:
        return None
    return max(clean, key=lambda r: (r.recall, -(r.mean_stop or 99), r.threshold or 0))


def best_provider(picks: list[Row]) -> Row | None:
    """Of each provider's recommended row, the one that stops the most loops among those at
    the best precision (a provider never wins by stopping more legitimate work)."""
    if not picks:
        return None
    top = max(r.precision for r in picks)
    return max((r for r in picks if r.precision == top), key=lambda r: (r.recall, r.tp))


def row_at(rows: list[Row], detector: str, threshold: float | None) -> Row | None:
    """The row of `detector` at `threshold` (to read the held-out row of a tuned threshold)."""
    return next((r for r in rows if r.detector == detector and r.threshold == threshold), None)


def table(rows: list[Row]) -> str:
    lines = [
        f"{'detector':<9} {'threshold':>9} {'precision':>9} {'recall':>7} "
        f"{'tp':>3} {'fp':>3} {'fn':>3} {'nudged':>6} {'mean stop':>9} {'max stop':>8}"
    ]
    for r in rows:
        thr = "-" if r.threshold is None else f"{r.threshold:.2f}"
        mean = "-" if r.mean_stop is None else f"{r.mean_stop:.2f}"
        worst = "-" if r.max_stop is None else str(r.max_stop)
        lines.append(
            f"{r.detector:<9} {thr:>9} {r.precision:>9.2f} {r.recall:>7.2f} "
            f"{r.tp:>3} {r.fp:>3} {r.fn:>3} {r.nudged:>6} {mean:>9} {worst:>8}"
        )
    return "\n".join(lines)


def chart_svg(rows: list[Row], best: Row | None) -> str:
    """A precision-recall chart of the lexical thresholds, hand-drawn SVG (no plotting deps)."""
    width, height, pad = 480, 360, 50
    plot_w, plot_h = width - 2 * pad, height - 2 * pad

    def xy(recall: float, precision: float) -> tuple[float, float]:
        return pad + recall * plot_w, height - pad - precision * plot_h

    colors = {LEXICAL: "#2563eb", SEMANTIC: "#16a34a"}
    curves = {d: [r for r in rows if r.detector == d] for d in colors}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">'
        "near_duplicate: precision vs recall by provider and threshold</text>",
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="black"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>',
        f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">recall</text>',
        f'<text x="14" y="{height / 2}" text-anchor="middle" '
        f'transform="rotate(-90 14 {height / 2})">precision</text>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x, _ = xy(tick, 0)
        _, y = xy(0, tick)
        parts.append(
            f'<text x="{x:.1f}" y="{height - pad + 14}" text-anchor="middle">{tick}</text>'
        )
        parts.append(f'<text x="{pad - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>')
    for n, (detector, points) in enumerate((d, p) for d, p in curves.items() if p):
        path = " ".join(
            f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}"
            for i, (x, y) in enumerate(xy(r.recall, r.precision) for r in points)
        )
        color = colors[detector]
        parts.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        parts.append(
            f'<text x="{width - pad - 90}" y="{pad + 12 + 14 * n}" fill="{color}">{detector}</text>'
        )
        for r in points:
            x, y = xy(r.recall, r.precision)
            dot = "#dc2626" if best is not None and r is best else color
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{dot}"/>')
            parts.append(f'<text x="{x + 6:.1f}" y="{y - 6:.1f}">{r.threshold:.2f}</text>')
    if best is not None:
        x, y = xy(best.recall, best.precision)
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" fill="#dc2626"/>')
        parts.append(
            f'<text x="{pad + 8}" y="{pad + 12}" fill="#dc2626">recommended: '
            f"{best.detector} {best.threshold:.2f}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
