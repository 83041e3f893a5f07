"""What makes two tool results "the same data" for the novelty progress mode.

In `novelty` mode a result is progress when its data hash was never seen in the task. Real
tools stamp their answers (a `fetched_at`, a `request_id`, an `etag`), and a stamp alone must
not look like progress, or a read repeated forever clears the window each time and no loop rule
ever sees it. So before the hash is taken two things are left out of the data:

1. The tool policy's `ignore_result_fields`: the same path syntax and canonicalization as
   `ignore_fields` for arguments (a top-level key, or a dotted path into nested objects; a
   literal key with a dot wins; a path that is not there is no error).
2. Unless the policy switches them off, the built-in volatile key names (`VOLATILE_KEYS`), matched
   whatever their case or separators (`fetchedAt`, `Fetched-At` and `fetched_at` are one name),
   at any depth, inside lists too.

The rules themselves (the volatile key list, the name matching, the path syntax, the hash)
have one home, `loopwarden_client.novelty`, in the pure Python client distribution the server
depends on: a client that sends a `data_hash` without the data hashes with the same functions.
This module adds what only the server needs: a tool policy's rules as a value, and the per-key
digests the trace keeps. No Django import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import loopwarden_client.novelty as shared

# Re-exported from the rule's one home, for the server's own readers.
from loopwarden_client.novelty import VOLATILE_KEYS as VOLATILE_KEYS
from loopwarden_client.novelty import VOLATILE_NAMES as VOLATILE_NAMES
from loopwarden_client.novelty import key_name as key_name

from agents.guard.fingerprint import canonical_json, sha256_hex


@dataclass(frozen=True)
class ResultRules:
    """A tool policy's rules for its results (no policy: the built-in volatile keys only)."""

    ignore_fields: tuple[str, ...] = ()
    volatile_keys: bool = True

    @classmethod
    def of(cls, ignore_fields: Any = (), volatile_keys: bool = True) -> ResultRules:
        fields_ = tuple(f for f in (ignore_fields or ()) if isinstance(f, str) and f)
        return cls(ignore_fields=fields_, volatile_keys=bool(volatile_keys))

    def to_dict(self) -> dict[str, Any]:
        """What the runner API hands a client that hashes results itself."""
        return {
            "ignore_result_fields": list(self.ignore_fields),
            "volatile_keys": sorted(VOLATILE_NAMES) if self.volatile_keys else [],
        }


def effective_data(data: Any, rules: ResultRules) -> Any:
    """A copy of `data` without what the rules leave out; the caller's value is untouched.

    Data that is JSON text is judged by the value it holds.
    """
    return shared.effective_data(data, rules.ignore_fields, volatile_keys=rules.volatile_keys)


def result_hash(data: Any, rules: ResultRules) -> str:
    """The data hash novelty judges by: sha256 of the canonical JSON of the effective data."""
    return shared.result_hash(data, rules.ignore_fields, volatile_keys=rules.volatile_keys)


# The pseudo key under which a result that is not a JSON object is digested as a whole.
WHOLE = "$"


def key_digests(data: Any, rules: ResultRules) -> dict[str, str]:
    """Top-level key -> short hash of its effective value: what the trace keeps of a result so
    the task page can say which keys made it new and the advisor can see which keys keep
    changing, without keeping (or re-reading) the data itself."""
    effective = effective_data(data, rules)
    if not isinstance(effective, dict):
        return {WHOLE: sha256_hex(canonical_json(effective))[:16]}
    return {str(k): sha256_hex(canonical_json(v))[:16] for k, v in effective.items()}


# How far back, in the task's trace rows (model and tool calls), a result judged new looks for
# the earlier result whose key digests it is compared with: the same call's last, else the same
# tool's last, among that many rows before it (none there: every key is new). The lookup reads
# the task's recent rows only, so its cost does not grow with the trace.
KEYS_LOOKBACK = 200


def changed_keys(before: dict[str, str] | None, after: dict[str, str]) -> list[str]:
    """Keys added, removed or changed from `before` to `after`, sorted; all of `after`'s keys
    when there is no earlier result to compare with."""
    if before is None:
        return sorted(after)
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


@dataclass
class KeyDiffs:
    """Per tool: how often same-fingerprint results differed, and in which keys."""

    tool: str
    pairs: int = 0  # consecutive same-fingerprint results compared
    differing: int = 0  # of them, how many differed at all
    keys: dict[str, int] = field(default_factory=dict)  # key -> pairs it differed in
    widths: list[int] = field(default_factory=list)  # number of keys each differing pair had


def propose_ignored_keys(
    diffs: KeyDiffs, *, max_keys: int, min_pairs: int, already: tuple[str, ...] = ()
) -> list[str]:
    """The keys to propose for `ignore_result_fields`, or [] when the pattern is not clear.

    Proposed when at least `min_pairs` same-fingerprint results differed, every one of them in
    at most `max_keys` keys (a result that changes in many keys is new data, not a stamp),
    and the keys that differ are the same ones each time (each proposed key differed in every
    differing pair). Keys already ignored, and the whole-value pseudo key, are never proposed.
    """
    if diffs.differing < min_pairs or not diffs.widths or max(diffs.widths) > max_keys:
        return []
    keys = sorted(
        k for k, n in diffs.keys.items() if n == diffs.differing and k != WHOLE and k not in already
    )
    return keys if keys and len(keys) <= max_keys else []
