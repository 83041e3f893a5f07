"""The trace timeline: model calls and tool calls in order, with loops marked.

A task may have thousands of trace rows, so the page shows one window of them (by `seq`,
which numbers model and tool calls together). The loop marks need the whole history, but only
two narrow columns of it (seq and fingerprint), which stays cheap at any length.

Marks, as the guard sees it:
- repeat: the call's fingerprint already occurred since the last verified progress (the
  window); the chip shows how many times so far.
- cycle: the call is part of a sequence of period 2..max_cycle_period that repeats back to
  back with at least two distinct fingerprints (A B A B).
- letters: each fingerprint that occurs more than once gets a letter and a colour, so
  "A A A" and "A B A B" read at a glance.
- same plan: the model asked for the very same tool calls as in its previous turn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from math import ceil
from typing import Any

from agents import storable
from agents.models import ModelCall, Task, ToolCall
from agents.redaction import DEFAULT, RedactionPolicy
from agents.selectors import Redactor

PAGE_SIZE = 50
MAX_STRING = 60
MAX_ARGS_TEXT = 240
MAX_CYCLE_SHOWN = 6


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
    shown = shorten(policy.apply(storable.decode(value)))
    text = _page_json(shown, separators=(", ", ": "))
    return text if len(text) <= MAX_ARGS_TEXT else text[: MAX_ARGS_TEXT - 1] + "…"


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
    same_plan: int = 0  # consecutive identical plans so far, this one included


@dataclass
class Row:
    seq: int
    kind: str  # "model" | "tool"
    call: ModelCall | ToolCall
    marks: Marks = field(default_factory=Marks)
    tag: FingerprintTag | None = None
    args: str = ""
    asks: str = ""

    @property
    def time(self) -> str:
        # strftime, not the template's date filter: it is called for every row of the window
        return self.call.created_at.strftime("%H:%M:%S")

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


def _tool_marks(task: Task) -> tuple[dict[int, Marks], dict[str, FingerprintTag]]:
    """Walk every tool call of the task (two columns each) the way the guard's window does."""
    history = list(
        task.tool_call_rows.order_by("seq").values_list(
            "seq", "fingerprint", "job_id", "revision_after"
        )
    )
    period_limit = min(int(task.limits.get("max_cycle_period") or 3), MAX_CYCLE_SHOWN)
    marks: dict[int, Marks] = {}
    window: list[tuple[int, str]] = []
    in_window: dict[str, int] = {}
    revision = 0
    seen: dict[str, int] = {}
    for seq, fp, job_id, revision_after in history:
        if not fp or job_id:  # stopped before fingerprinting, or a status poll
            continue
        seen[fp] = seen.get(fp, 0) + 1
        mark = marks.setdefault(seq, Marks())
        in_window[fp] = mark.repeat = in_window.get(fp, 0) + 1
        window.append((seq, fp))
        for period in range(2, period_limit + 1):
            if len(window) < 2 * period:
                continue
            last = [f for _, f in window[-2 * period :]]
            if last[:period] == last[period:] and len(set(last[period:])) >= 2:
                for cycle_seq, _ in window[-2 * period :]:
                    cycle_mark = marks.setdefault(cycle_seq, Marks())
                    cycle_mark.cycle = cycle_mark.cycle or period
        if revision_after is not None and revision_after > revision:
            revision = revision_after
            # Progress clears the window; this call starts the new one.
            window, in_window = [(seq, fp)], {fp: 1}
    tags: dict[str, FingerprintTag] = {}
    lettered = 0
    for fp, times in seen.items():  # dicts keep first-appearance order
        tag = FingerprintTag(short=fp[:8])
        if times > 1:
            tag.letter, tag.hue = _letters(lettered), (210 + lettered * 137) % 360
            lettered += 1
        tags[fp] = tag
    return marks, tags


def _plan_marks(task: Task) -> dict[int, int]:
    """Consecutive identical non-empty plans (the guard's repeated_output signal)."""
    out: dict[int, int] = {}
    previous, run = "", 0
    for seq, signature in task.model_call_rows.order_by("seq").values_list("seq", "signature"):
        if not signature:
            continue
        run = run + 1 if signature == previous else 1
        previous = signature
        if run > 1:
            out[seq] = run
    return out


def timeline(task: Task, page: int | None = None) -> Timeline:
    total = task.trace_seq
    pages = max(1, ceil(total / PAGE_SIZE))
    page = pages if page is None else max(1, min(page, pages))
    # Windows are cut from the newest row back, so the latest one (the default) is full and
    # the oldest may be short.
    high = total - (pages - page) * PAGE_SIZE
    low = max(0, high - PAGE_SIZE)
    tool_marks, tags = _tool_marks(task)
    plan_marks = _plan_marks(task)
    rows: list[Row] = []
    masks = Redactor()
    for call in ModelCall.objects.filter(task=task, seq__gt=low, seq__lte=high):
        asks = ", ".join(
            storable.printable(str(c.get("name", "?")))
            for c in (call.tool_calls or [])
            if isinstance(c, dict)
        )
        rows.append(Row(call.seq, "model", call, Marks(same_plan=plan_marks.get(call.seq, 0)),
                        asks=asks))  # fmt: skip
    for call in ToolCall.objects.filter(task=task, seq__gt=low, seq__lte=high):
        rows.append(Row(call.seq, "tool", call, tool_marks.get(call.seq, Marks()),
                        tags.get(call.fingerprint),
                        args_text(call.args, masks.policy(call.tool))))  # fmt: skip
    rows.sort(key=lambda row: row.seq)
    return Timeline(
        rows=rows,
        page=page,
        pages=pages,
        total=total,
        repeats=sum(1 for m in tool_marks.values() if m.repeat > 1),
        cycles=sum(1 for m in tool_marks.values() if m.cycle),
        letters=[t for t in tags.values() if t.letter],
    )
