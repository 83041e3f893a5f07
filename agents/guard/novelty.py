"""What makes two tool results "the same data" for the novelty progress mode.

In `novelty` mode a result is progress when its data hash was never seen in the task. Real
tools stamp their answers (a `fetched_at`, a `request_id`, an `etag`), and a stamp alone must
not look like progress, or a read repeated forever clears the window each time and no loop rule
ever sees it. So before the hash is taken two things are left out of the data:

1. The tool policy's `ignore_result_fields`: the same path syntax and canonicalization as
   `ignore_fields` for arguments (a top-level key, or a dotted path into nested objects; a
   literal key with a dot wins; a path that is not there is no error).
2. Unless the policy switches them off, the built-in volatile key names below, matched
   whatever their case or separators (`fetchedAt`, `Fetched-At` and `fetched_at` are one name),
   at any depth, inside lists too.

Pure Python, no Django import: the service and the client library apply the same rules.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any

from agents.guard.fingerprint import canonical_json, drop_field, sha256_hex

# Key names that say "when or by whom this answer was produced", not "what the data is".
# Matched on the normalized name (lowercase, separators removed), whole name only: `timestamp`
# is volatile, `timestamps_enabled` is not. Documented in docs/API.md; keep the two in step.
VOLATILE_KEYS: tuple[str, ...] = (
    # when the answer was made
    "fetched_at", "retrieved_at", "requested_at", "responded_at", "generated_at",
    "served_at", "queried_at", "cached_at", "received_at", "updated_at", "last_updated",
    "as_of", "timestamp", "ts", "now", "server_time", "current_time", "response_time",
    "expires_at",
    # how long it took
    "elapsed", "elapsed_ms", "took", "took_ms", "duration_ms", "latency_ms", "processing_time",
    # who answered, and the request's own identity
    "request_id", "req_id", "x_request_id", "x_amzn_request_id", "x_amz_request_id",
    "trace_id", "x_trace_id", "span_id", "correlation_id", "x_correlation_id",
    "response_id", "traceparent", "server", "served_by", "hostname",
    # cache validators and one-time values
    "etag", "nonce", "cache_status", "x_cache",
)  # fmt: skip

_SEPARATORS = re.compile(r"[\s_\-.:/]+")


def key_name(name: Any) -> str:
    """`Fetched-At`, `fetchedAt` and `fetched_at` are all `fetchedat`."""
    return _SEPARATORS.sub("", str(name)).lower()


VOLATILE_NAMES = frozenset(key_name(k) for k in VOLATILE_KEYS)


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


def _drop_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: _drop_volatile(item)
            for key, item in value.items()
            if key_name(key) not in VOLATILE_NAMES
        }
    if isinstance(value, list):
        return [_drop_volatile(item) for item in value]
    return value


def _parsed(data: Any) -> Any:
    """JSON text as its value: frameworks turn a tool's answer into text (LangChain's
    ToolMessage, the OpenAI Agents SDK), and a stamp inside the text is a stamp all the same."""
    if isinstance(data, str) and data[:1] in ("{", "["):
        try:
            return json.loads(data)
        except ValueError:
            return data
    return data


def effective_data(data: Any, rules: ResultRules) -> Any:
    """A copy of `data` without what the rules leave out; the caller's value is untouched.

    Data that is JSON text is judged by the value it holds.
    """
    data = _parsed(data)
    if rules.volatile_keys:
        data = _drop_volatile(data)
    if rules.ignore_fields and isinstance(data, dict):
        data = copy.deepcopy(data) if not rules.volatile_keys else data
        for path in rules.ignore_fields:
            drop_field(data, path)
    return data


def result_hash(data: Any, rules: ResultRules) -> str:
    """The data hash novelty judges by: sha256 of the canonical JSON of the effective data."""
    return sha256_hex(canonical_json(effective_data(data, rules)))


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
