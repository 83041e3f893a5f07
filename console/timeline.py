"""The trace timeline: model calls and tool calls in order, with loops marked.

A task may have thousands of trace rows, so the page shows one window of them (by `seq`,
which numbers model and tool calls together). The loop marks need the whole history, but only
two narrow columns of it (seq and fingerprint), which stays cheap at any length.

Marks, as the guard saw them: the trace is replayed through the guard's own window rules
(agents.guard.window), so a mark and the decision at that step cannot disagree.
- repeat: the call's fingerprint was already done (or is in flight) since the last progress
  (the window); the chip shows how many times so far, this request included.
- cycle: the call is part of a sequence of period 2..max_cycle_period that repeats back to
  back with at least two distinct fingerprints (A B A B), completed by a request.
- letters: each fingerprint that occurs more than once gets a letter and a colour, so
  "A A A" and "A B A B" read at a glance.
- same plan: the model asked for the very same tool calls as in its previous turn(s); the
  chip shows the repeated-output streak as the guard counted it when the usage was reported
  (agents.guard.model.note_plan), restarted by verified progress and by a status poll.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from math import ceil
from typing import Any

from django.db.models import F

from agents.db import storable
from agents.guard import terms
from agents.guard.model import note_plan
from agents.guard.transitions import restart_streak
from agents.guard.window import cycle_period, is_poll, join_window, repetition, window_count
from agents.models import ModelCall, Task, ToolCall
from agents.redaction import DEFAULT, RedactionPolicy
from agents.selectors import Redactor
from console.templatetags.console_formats import duration

PAGE_SIZE = 50
MAX_STRING = 60
MAX_ARGS_TEXT = 240
MAX_BLOCK_TEXT = 4000  # characters of pretty-printed JSON in an expandable block


def shorten(value: Any, depth: int = 0) -> Any:
    """Shorten long strings and lists, bound the depth: what fits in a table cell."""
    if depth > 6:
        return "…"
    if isinstance(value, dict):
        return {str(k): shorten(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        shown = [shorten(v, depth + 1) for v in value[:20]]
        return shown + [f"… {len(value) - 20} more"] if len(value) > 20 else shown
    if isinstance(value, str) and len(value) > MAX_STRING:
        return value[: MAX_STRING - 1] + "…"
    return value


def _page_json(value: Any, **options: Any) -> str:
    """JSON text for a page: a lone surrogate written as its escape (a page is UTF-8, which
    cannot carry one)."""
    text = json.dumps(value, ensure_ascii=False, default=str, **options)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def shown_json(value: Any, **options: Any) -> str:
    """A stored value as JSON text for a page, reported text decoded as the agent sent it."""
    return _page_json(storable.decode(value), **options)


def args_text(value: Any, policy: RedactionPolicy = DEFAULT) -> str:
    """Args or a result as one short line, reported text decoded as the agent sent it, then
    masked by the redaction policy (agents.redaction), so a secret is never half shown by the
    shortening."""
    return masked_args_text(policy.apply(storable.decode(value)))


def masked_args_text(shown: Any) -> str:
    """A value already decoded and masked, as one short line."""
    text = _page_json(shorten(shown), separators=(", ", ": "))
    return text if len(text) <= MAX_ARGS_TEXT else text[: MAX_ARGS_TEXT - 1] + "…"


@dataclass
class Block:
    """A value in full, for an expandable block: redacted, pretty-printed, cut when long."""

    text: str
    total: int  # characters before the cut

    @property
    def cut(self) -> bool:
        return self.total > len(self.text)

    @property
    def limit(self) -> int:
        return MAX_BLOCK_TEXT


def block(value: Any, policy: RedactionPolicy = DEFAULT) -> Block:
    """Args or a result in full, reported text decoded as the agent sent it, masked by the
    redaction policy (agents.redaction) before it is written out, so a cut never shows half a
    secret; at most MAX_BLOCK_TEXT characters."""
    return masked_block(policy.apply(storable.decode(value)))


def masked_block(shown: Any) -> Block:
    """A value already decoded and masked, for an expandable block."""
    text = _page_json(shown, indent=2)
    return Block(text[:MAX_BLOCK_TEXT], len(text))


def result_value(call: ToolCall) -> Any:
    """What the agent reported: the data alone, or with its error code and message."""
    if not (call.result_code or call.result_error):
        return call.result_data
    shown = {"code": call.result_code or None, "error": call.result_error or None}
    if call.result_data is not None:
        shown["data"] = call.result_data
    return shown


def duration_text(ms: float | None) -> str:
    """A call's duration in the console's one format ("" while it has not ended)."""
    return "" if ms is None or ms < 0 else duration(ms / 1000)


def _between(start: Any, end: Any) -> float | None:
    return None if end is None else (end - start).total_seconds() * 1000


def duration_ms(call: ModelCall | ToolCall) -> float | None:
    """A tool call: the duration its result reported, else request to result. A model call:
    request to usage report. None while it has not ended."""
    if isinstance(call, ModelCall):
        return _between(call.created_at, call.settled_at)
    if call.duration_ms is not None:
        return call.duration_ms
    return _between(call.created_at, call.reported_at)


def _letters(index: int) -> str:
    out = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        out = chr(65 + rest) + out
    return out


@dataclass
class FingerprintTag:
    short: str
    letter: str = ""
    hue: int = 0


@dataclass
class Marks:
    repeat: int = 0  # occurrences in the window so far, this one included; >= 2 is a repeat
    cycle: int = 0  # period of the cycle this call belongs to
    rule: str = ""  # the loop rule the guard's window trips at this request, if any
    same_plan: int = 0  # the guard's repeated-output streak at this usage report; >= 2 shown


@dataclass
class Row:
    seq: int
    kind: str  # "model" | "tool"
    call: ModelCall | ToolCall
    marks: Marks = field(default_factory=Marks)
    tag: FingerprintTag | None = None
    args: str = ""
    asks: str = ""
    args_block: Block | None = None
    result_block: Block | None = None
    answered: Block | None = None  # REUSE: the ledger's stored result the agent was answered

    @property
    def duration(self) -> str:
        return duration_text(duration_ms(self.call))

    @property
    def stamp(self) -> str:
        return self.call.created_at.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


@dataclass
class Timeline:
    rows: list[Row]
    page: int
    pages: int
    total: int
    repeats: int
    cycles: int
    letters: list[FingerprintTag]

    @property
    def last_seq(self) -> int:
        return self.total - (self.pages - self.page) * PAGE_SIZE

    @property
    def first_seq(self) -> int:
        return max(1, self.last_seq - PAGE_SIZE + 1)

    @property
    def has_earlier(self) -> bool:
        return self.page > 1

    @property
    def has_later(self) -> bool:
        return self.page < self.pages


# A result that reached the tool gate's progress step (step 5) joined the window, unless the
# task was already stopped when it arrived: these kinds, with neither of these reasons.
_JOINING_KINDS = (terms.SUCCESS, terms.RETRYABLE)
_BEFORE_PROGRESS_STEP = ("invalid_evidence", "unknown_commit")
# A status poll past the poll budget restarted the repeated-output streak: one that executed
# or reused, or one a later request check stopped (these reasons). A fingerprinted STOP always
# stopped the task itself: a request on a stopped task is answered before the fingerprint.
_POLL_PASSED = (terms.EXECUTE, terms.REUSE)
_AFTER_POLL_STEP = ("execution_budget", "no_progress")


@dataclass
class _Step:
    """One thing in the trace that moved the guard's window, in the order it happened."""

    at: Any  # when: a request's created_at, a result's reported_at, a release's released_at,
    # a model call's settled_at (its usage report)
    seq: int  # at the same instant, in call order: a request, then its release or result
    order: int
    kind: str  # "result" | "release" | "request" | "usage"
    row: tuple[Any, ...]


def _steps(task: Task) -> tuple[list[_Step], list[tuple[Any, Any]]]:
    """The task's tool calls as requests, results and releases, and its model calls' usage
    reports, in time order (three narrow reads), and its phases as (started_at, ended_at)."""
    rows = task.tool_call_rows.order_by("seq").values_list(
        "seq", "fingerprint", "tool", "job_id", "decision", "created_at", "reported_at",
        "released_at", "result_kind", "result_reason", "revision_after", "novel_keys", "reason",
    )  # fmt: skip
    steps: list[_Step] = []
    settled = task.model_call_rows.filter(settled_at__isnull=False).values_list(
        "seq", "signature", "settled_at"
    )
    for seq, signature, settled_at in settled:
        steps.append(_Step(settled_at, seq, 2, "usage", (seq, signature)))
    for row in rows:
        seq, created_at, reported_at, released_at = row[0], row[5], row[6], row[7]
        steps.append(_Step(created_at, seq, 0, "request", row))
        if released_at is not None and (reported_at is None or released_at <= reported_at):
            steps.append(_Step(released_at, seq, 1, "release", row))
        if reported_at is not None:
            steps.append(_Step(reported_at, seq, 2, "result", row))
    steps.sort(key=lambda step: (step.at, step.seq, step.order))
    phases = list(task.phases.order_by("number").values_list("started_at", "ended_at"))
    return steps, phases


def _stopped_at(phases: list[tuple[Any, Any]], at: Any) -> bool:
    """Was the task terminal at `at`? A result that stopped the task closed its phase at its
    own instant, so it still met a running task."""
    stopped = False
    for started_at, ended_at in phases:
        if started_at > at:
            break
        stopped = ended_at is not None and ended_at < at
    return stopped


def _replay(task: Task) -> tuple[dict[int, Marks], dict[str, FingerprintTag]]:
    """Replay every tool call of the task (a few narrow columns each) through the guard's own
    window rules (agents.guard.window): what the gate counted at each request is the mark.
    The model calls' usage reports are replayed in between, through the guard's own streak
    (agents.guard.model.note_plan): the streak at each report is its "same plan" mark.

    The window is rebuilt as the gate kept it: an executed call is pending until its result
    (even one that came after a stop), which joins the window (a poll's too) unless it stopped
    the task before the progress step or the task was stopped already; progress (a higher
    revision, or a result novelty judged new) clears it first; a reused write joins it at
    once; a BLOCKed or stopped request never does, and a status poll is never counted.
    Requests and results are ordered by their timestamps, exact for an agent that calls one
    tool at a time.

    The streak restarts where the guard restarts it (agents.guard.transitions.restart_streak):
    on a result that made progress, and on a status poll that got past the poll budget. A usage
    report counts only on a running task; the streak outlives a resume, as in the guard.
    """
    steps, phases = _steps(task)
    limits = terms.Limits.from_dict(task.limits)
    state = terms.TaskState(
        state=terms.RUNNING, phase=1, limits=limits, deadline_at=task.deadline_at
    )
    owner: dict[int, int] = {}  # id(window entry) -> the seq of the call it stands for
    in_flight: list[int] = []  # the seqs of `state.pending`'s calls, in the same order

    def leaves_pending(fp: str) -> None:
        if fp in state.pending:
            del in_flight[state.pending.index(fp)]
            state.pending.remove(fp)

    marks: dict[int, Marks] = {}
    seen: dict[str, int] = {}
    for step in steps:
        if step.kind == "usage":
            if not _stopped_at(phases, step.at):
                seq, signature = step.row
                run = note_plan(state.signatures, signature)
                if run > 1:
                    marks.setdefault(seq, Marks()).same_plan = run
            continue
        seq, fp, tool, job_id, decision = step.row[:5]
        if not fp:  # stopped before fingerprinting
            continue
        if step.kind == "release":
            leaves_pending(fp)
        elif step.kind == "result":
            kind, reason, revision_after, novel_keys = step.row[8:12]
            before, state.revision = state.revision, max(state.revision, revision_after or 0)
            if step.row[7] is None:  # still in flight, until now
                leaves_pending(fp)
            if _stopped_at(phases, step.at):  # answered STOP: nothing else moved
                continue
            if kind not in _JOINING_KINDS or reason in _BEFORE_PROGRESS_STEP:
                continue
            progress = novel_keys is not None or state.revision > before
            if progress:
                restart_streak(state)
            entry = terms.WindowEntry(fingerprint=fp, tool=tool)
            owner[id(entry)] = seq
            join_window(state, entry, progress=progress)
        elif is_poll(job_id):
            if decision in _POLL_PASSED or (
                decision == terms.STOP and step.row[12] in _AFTER_POLL_STEP
            ):
                restart_streak(state)
        else:
            seen[fp] = seen.get(fp, 0) + 1
            mark = marks.setdefault(seq, Marks())
            mark.repeat = window_count(state, fp) + 1
            mark.rule = repetition(state, fp) or ""
            period = cycle_period(state, fp)
            if period:
                # The calls the cycle rule read, in request order (window.requested).
                members = [*(owner[id(e)] for e in state.window), *in_flight]
                members = [*members[len(members) - (2 * period - 1) :], seq]
                for member in members:
                    cycle_mark = marks.setdefault(member, Marks())
                    cycle_mark.cycle = cycle_mark.cycle or period
            if decision == terms.EXECUTE:
                state.pending.append(fp)
                in_flight.append(seq)
            elif decision == terms.REUSE:
                entry = terms.WindowEntry(fingerprint=fp, tool=tool)
                owner[id(entry)] = seq
                join_window(state, entry, progress=False)
    tags: dict[str, FingerprintTag] = {}
    lettered = 0
    for fp, times in seen.items():  # dicts keep first-appearance order
        tag = FingerprintTag(short=fp[:8])
        if times > 1:
            tag.letter, tag.hue = _letters(lettered), (210 + lettered * 137) % 360
            lettered += 1
        tags[fp] = tag
    return marks, tags


def timeline(task: Task, page: int | None = None) -> Timeline:
    total = task.trace_seq
    pages = max(1, ceil(total / PAGE_SIZE))
    page = pages if page is None else max(1, min(page, pages))
    # Windows are cut from the newest row back, so the latest one (the default) is full and
    # the oldest may be short.
    high = total - (pages - page) * PAGE_SIZE
    low = max(0, high - PAGE_SIZE)
    marks, tags = _replay(task)
    rows: list[Row] = []
    masks = Redactor()
    for call in ModelCall.objects.filter(task=task, seq__gt=low, seq__lte=high):
        asks = ", ".join(
            DEFAULT.mask_text(storable.printable(str(c.get("name", "?"))))
            for c in (call.tool_calls or [])
            if isinstance(c, dict)
        )
        row = Row(call.seq, "model", call, marks.get(call.seq, Marks()), asks=asks)
        if call.tool_calls:
            # The tool calls the model asked for, each masked by its own tool's policy.
            row.args_block = masked_block(masks.tool_calls(storable.decode(call.tool_calls)))
        rows.append(row)
    # A REUSE was answered the ledger row's stored result: read in the same statement.
    calls = ToolCall.objects.filter(task=task, seq__gt=low, seq__lte=high).annotate(
        answered_result=F("operation__result")
    )
    for step in calls:
        policy = masks.policy(step.tool)
        shown = policy.apply(storable.decode(step.args))  # masked once, for the line and block
        row = Row(step.seq, "tool", step, marks.get(step.seq, Marks()),
                  tags.get(step.fingerprint), masked_args_text(shown),
                  args_block=masked_block(shown))  # fmt: skip
        if step.reported_at is not None:
            row.result_block = block(result_value(step), policy)
        if step.decision == terms.REUSE:
            row.answered = block(step.answered_result, policy)
        rows.append(row)
    rows.sort(key=lambda row: row.seq)
    return Timeline(
        rows=rows,
        page=page,
        pages=pages,
        total=total,
        repeats=sum(1 for m in marks.values() if m.repeat > 1),
        cycles=sum(1 for m in marks.values() if m.cycle),
        letters=[t for t in tags.values() if t.letter],
    )
