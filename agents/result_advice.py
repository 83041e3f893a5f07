"""The report page's advice on volatile result keys: which tools to give `ignore_result_fields`.

A tool whose results for the same call (same fingerprint, same task) keep differing in the same
one to three keys, and only in those, is stamping its answers (a replica name, a cache node, a
request counter) with keys the built-in volatile list does not know. In novelty mode each such
answer looks like new data, so a repeated read never stops as a loop. The advice is read from
the trace rows' `result_keys` (top-level key -> short hash of its value, after the tool's
current rules), which every reported result with data keeps: no result data is re-read, and the
keys already ignored are not in them, so an applied proposal is not proposed again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from agents.guard.novelty import KeyDiffs, changed_keys, propose_ignored_keys
from agents.models import ToolCall, ToolPolicy
from agents.reports import window
from agents.selectors import day_bounds

# At most this many keys may differ between two results of one call for a proposal: more is
# new data, not a stamp.
MAX_KEYS = 3
# At least this many differing pairs of results, so one odd answer proposes nothing.
MIN_PAIRS = 2
# Only the most recent reported results are read, so the page costs the same on a busy system.
SCAN_ROWS = 5000


@dataclass
class ResultFieldProposal:
    tool: str
    keys: list[str]  # to add to the tool policy's ignore_result_fields
    pairs: int  # pairs of same-call results that differed, each only in these keys
    tasks: int  # tasks they came from
    current: list[str]  # the policy's ignore_result_fields now


def _key_diffs(rows) -> tuple[dict[str, KeyDiffs], dict[str, set]]:
    """Compare each result with the previous result of the same call in the same task."""
    previous: dict[tuple, dict] = {}
    diffs: dict[str, KeyDiffs] = {}
    tasks: dict[str, set] = {}
    for task_id, tool, fingerprint, keys in rows:
        if not isinstance(keys, dict):
            continue
        before = previous.get((task_id, fingerprint))
        previous[(task_id, fingerprint)] = keys
        if before is None:
            continue
        tool_diffs = diffs.setdefault(tool, KeyDiffs(tool=tool))
        tool_diffs.pairs += 1
        changed = changed_keys(before, keys)
        if not changed:
            continue
        tool_diffs.differing += 1
        tasks.setdefault(tool, set()).add(task_id)
        for key in changed:
            tool_diffs.keys[key] = tool_diffs.keys.get(key, 0) + 1
        # A result that changed in every key it has is another answer, not a stamped one.
        everything = len(changed) >= len(set(before) | set(keys))
        tool_diffs.widths.append(MAX_KEYS + 1 if everything else len(changed))
    return diffs, tasks


def result_field_proposals(*, days: int, today: date | None = None) -> list[ResultFieldProposal]:
    """Tools whose same-call results in the last `days` days differ only in a few keys."""
    first, _last = window(days, today=today)
    start, _end = day_bounds(first)
    recent = (
        # The window as a range of the creation time, not `created_at__date`: a range is what
        # the time's block-range index reads, so a history whose results carry no data (no
        # `result_keys`) is read over the window's calls only, not walked down to the first
        # call ever made by the primary key (5 million rows in a year: issue 43).
        ToolCall.objects.filter(created_at__gte=start, result_keys__isnull=False, job_id="")
        .exclude(fingerprint="")
        .order_by("-id")  # newest first: stops after SCAN_ROWS matches
        .values_list("task_id", "tool", "fingerprint", "result_keys", "seq")[:SCAN_ROWS]
    )
    rows = sorted(recent, key=lambda row: (str(row[0]), row[4]))
    diffs, tasks = _key_diffs(row[:4] for row in rows)
    policies = {p.tool: p for p in ToolPolicy.objects.filter(tool__in=diffs)}
    proposals = []
    for tool in sorted(diffs):
        policy = policies.get(tool)
        current = list(policy.ignore_result_fields) if policy else []
        keys = propose_ignored_keys(
            diffs[tool], max_keys=MAX_KEYS, min_pairs=MIN_PAIRS, already=tuple(current)
        )
        if keys:
            proposals.append(ResultFieldProposal(
                tool=tool, keys=keys, pairs=diffs[tool].differing,
                tasks=len(tasks.get(tool, ())), current=current,
            ))  # fmt: skip
    return proposals
