"""The trace timeline: model calls and tool calls in order, with loops marked.

A task may have thousands of trace rows, so the page shows one window of them (by `seq`,
which numbers model and tool calls together).

Marks are what the guard counted when it decided, stored on each trace row
(`terms.Outcome.marks`): nothing here re-derives them.
- repeat: the call's fingerprint was already done (or is in flight) since the last progress
  (the window); the chip shows how many times so far, this request included.
- cycle: the request completed a sequence of period 2..max_cycle_period that repeats back to
  back with at least two distinct fingerprints (A B A B).
- letters: each fingerprint requested more than once gets a letter and a colour, so
  "A A A" and "A B A B" read at a glance.
- same plan: the model asked for the very same tool calls as in its previous turn(s): the
  repeated-output streak as the guard counted it when the usage was reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from math import ceil
from typing import Any

from django.db.models import F

from agents.db import storable
from agents.guard import terms
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
    cycle: int = 0  # period of the cycle this call completes
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


def _marks(stored: dict[str, Any] | None) -> Marks:
    """The marks the guard stored on a trace row when it decided (`terms.Outcome.marks`); a
    row from before the guard stored them has none."""
    if not stored:
        return Marks()
    return Marks(
        repeat=int(stored.get("repeat") or 0),
        cycle=int(stored.get("cycle") or 0),
        rule=str(stored.get("rule") or ""),
        same_plan=int(stored.get("same_plan") or 0),
    )


def _tags(task: Task) -> tuple[dict[str, FingerprintTag], int, int]:
    """A short tag for each fingerprint the task requested, lettered when it was requested
    more than once (status polls aside); and how many of its requests the guard marked as a
    repeat, and as completing a cycle."""
    seen: dict[str, int] = {}
    repeats = cycles = 0
    rows = task.tool_call_rows.order_by("seq").values_list("fingerprint", "job_id", "marks")
    for fp, job_id, stored in rows:
        if fp and not job_id:
            seen[fp] = seen.get(fp, 0) + 1
        if stored:
            repeats += int(stored.get("repeat") or 0) > 1
            cycles += bool(stored.get("cycle"))
    tags: dict[str, FingerprintTag] = {}
    lettered = 0
    for fp, times in seen.items():  # dicts keep first-appearance order
        tag = FingerprintTag(short=fp[:8])
        if times > 1:
            tag.letter, tag.hue = _letters(lettered), (210 + lettered * 137) % 360
            lettered += 1
        tags[fp] = tag
    return tags, repeats, cycles


def timeline(task: Task, page: int | None = None) -> Timeline:
    total = task.trace_seq
    pages = max(1, ceil(total / PAGE_SIZE))
    page = pages if page is None else max(1, min(page, pages))
    # Windows are cut from the newest row back, so the latest one (the default) is full and
    # the oldest may be short.
    high = total - (pages - page) * PAGE_SIZE
    low = max(0, high - PAGE_SIZE)
    tags, repeats, cycles = _tags(task)
    rows: list[Row] = []
    masks = Redactor()
    for call in ModelCall.objects.filter(task=task, seq__gt=low, seq__lte=high):
        asks = ", ".join(
            DEFAULT.mask_text(storable.printable(str(c.get("name", "?"))))
            for c in (call.tool_calls or [])
            if isinstance(c, dict)
        )
        row = Row(call.seq, "model", call, _marks(call.marks), asks=asks)
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
        row = Row(step.seq, "tool", step, _marks(step.marks),
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
        repeats=repeats,
        cycles=cycles,
        letters=[t for t in tags.values() if t.letter],
    )
