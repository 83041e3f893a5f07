"""Canonical forms and hashes: what makes two tool calls "the same call".

Loop detection is only as good as its notion of identity. Two requests that differ only in key
order, in whitespace the JSON encoder adds, or in a field the tool policy declares irrelevant
(a request id, a timestamp) must hash the same; two requests that differ in anything the tool
sees must not. So: keys sorted recursively, compact separators, list order kept (order is
meaning in a list), strings untouched (" a" and "a" are different arguments), and a number
written in its one JSON form (JSON has a single number type: 1, 1.0, 1e0 and -0.0 vs 0 are the
same argument, so a float with no fraction is written as the integer it equals).
"""

from __future__ import annotations

import copy
import hashlib
import json
from decimal import Decimal
from typing import Any

# The path syntax of `ignore_fields`, shared with the result rules (see guard/novelty.py).
from loopwarden_client.novelty import drop_field


def _normalize(value: Any) -> Any:
    """Turn `value` into plain JSON types so `json.dumps(sort_keys=True)` never trips.

    Dict keys become strings (mixed int/str keys cannot be sorted otherwise); tuples become
    lists; Decimal and anything else json does not know becomes its `str()`, so a price of
    Decimal("1.10") and the string "1.10" are the same argument, and the hash never depends on
    float rounding of a Decimal.
    """
    if isinstance(value, dict):
        return {str(key): _normalize(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalize(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        # 1.0 is the JSON number 1: a model that rewrites 1 as 1.0 repeats the same call.
        return int(value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def canonical_json(value: Any) -> str:
    """The one text form of a JSON-like value that fingerprints and hashes are taken over."""
    return json.dumps(_normalize(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def effective_args(args: dict[str, Any], ignore_fields: list[str] | None) -> dict[str, Any]:
    """A copy of `args` without the policy's ignored fields; the caller's dict is untouched."""
    if not ignore_fields:
        return args
    cleaned = copy.deepcopy(args)
    for field_path in ignore_fields:
        drop_field(cleaned, field_path)
    return cleaned


def fingerprint(tool: str, args: dict[str, Any], ignore_fields: list[str]) -> tuple[str, str]:
    """(sha256 hex of tool + "\\n" + canonical effective args, the canonical args text).

    The newline keeps ("ab", {}) and ("a", "b{}")-style concatenations from colliding. The
    args text is returned too: the window keeps it for the near-duplicate check.
    """
    args_text = canonical_json(effective_args(args, ignore_fields))
    return sha256_hex(f"{tool}\n{args_text}"), args_text


def action_signature(tool_calls: list[dict[str, Any]] | None) -> str:
    """What the model asked to do in one turn, as a hash; "" when it asked for no tool call.

    Three identical non-empty signatures in a row mean the model keeps planning the same step
    (repeated_output). Order matters: [A, B] and [B, A] are different plans.
    """
    if not tool_calls:
        return ""
    return sha256_hex(plan_text(tool_calls))


def plan_text(tool_calls: list[dict[str, Any]] | None) -> str:
    """The canonical text an action signature hashes ("" for no tool call): what the
    repeated-output rule compares by similarity when a threshold is set."""
    if not tool_calls:
        return ""
    pairs = []
    for call in tool_calls:
        args = call.get("args")
        pairs.append([call.get("name"), {} if args is None else args])
    return canonical_json(pairs)


def data_hash(data: Any) -> str:
    """Hash of a tool result's data, for the novelty progress mode."""
    return sha256_hex(canonical_json(data))
