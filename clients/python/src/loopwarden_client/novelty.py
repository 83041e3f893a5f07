"""The rules for the `novelty` data hash: the one definition, applied by the server and clients.

When a result carries `data`, Loopwarden hashes it itself, without the tool policy's
`ignore_result_fields` and the built-in volatile keys below, and a `data_hash` sent beside the
data is not used. The adapters always send the data, so they need nothing from here. A client
that keeps its data to itself and sends only `data_hash` must hash the way the server would:
`result_hash(data, ignore_result_fields=[...the tool policy's...])`, with
`volatile_keys=False` when the admin switched the defaults off for that tool.

The server's guard core (`agents/guard/novelty.py`) hashes with these very functions, and its
argument fingerprints drop `ignore_fields` with `drop_field`: the rule lives here, in the pure
Python distribution both sides install (the client never imports the server). Keep the
`VOLATILE_KEYS` list in step with docs/API.md.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

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


def drop_field(data: dict[str, Any], path: str) -> None:
    """Remove one ignored path in place: a top-level key, or a dotted path into nested objects.

    A literal top-level key wins over the dotted reading, so a field really named "a.b" can
    still be ignored. A path that does not exist is not an error: a policy lists fields that
    *may* be present. The server uses it for a tool's `ignore_fields` (arguments) too.
    """
    if path in data:
        del data[path]
        return
    if "." not in path:
        return
    *parents, leaf = path.split(".")
    node: Any = data
    for part in parents:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict):
        node.pop(leaf, None)


def _parsed(data: Any) -> Any:
    """JSON text as its value: frameworks turn a tool's answer into text (LangChain's
    ToolMessage, the OpenAI Agents SDK), and a stamp inside the text is a stamp all the same."""
    if isinstance(data, str) and data[:1] in ("{", "["):
        try:
            return json.loads(data)
        except ValueError:
            return data
    return data


def effective_data(
    data: Any, ignore_result_fields: Iterable[str] = (), *, volatile_keys: bool = True
) -> Any:
    """A copy of `data` without the ignored paths and (unless switched off) volatile keys."""
    data = _parsed(data)
    data = _drop_volatile(data) if volatile_keys else copy.deepcopy(data)
    if isinstance(data, dict):
        for path in ignore_result_fields:
            if isinstance(path, str) and path:
                drop_field(data, path)
    return data


def result_hash(
    data: Any, ignore_result_fields: Iterable[str] = (), *, volatile_keys: bool = True
) -> str:
    """sha256 of the canonical JSON (keys sorted, compact, UTF-8) of the effective data. A
    lone surrogate (text cut inside an emoji's pair), which UTF-8 has no form for, is hashed
    by its code unit: a result is hashed whatever text it holds, never refused here."""
    kept = effective_data(data, ignore_result_fields, volatile_keys=volatile_keys)
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
