"""Text the database can hold: the one rule, and the faithful encoding of what cannot be refused.

PostgreSQL refuses two things Python strings can carry: NUL (U+0000, in text and in jsonb) and
lone surrogates (U+D800..U+DFFF, which are not Unicode scalar values, so UTF-8 cannot encode
them and jsonb refuses their escapes). SQLite refuses lone surrogates in text columns.

The rule, applied once where a JSON body enters the API (`agents.api.parsers`):

- input that asks for something (a task, a tool request, a stop, a profile...) carrying such
  text is refused with 400 `UNSUPPORTED_TEXT`, naming the field: the sender can fix it;
- a report of what already happened (a tool result, a model call's usage) is never refused
  for it: a committed write must reach the ledger and spent money must be recorded. Its strings
  are stored encoded and decoded on the way out (`agents.api.renderers`), so the agent gets
  back, on REUSE, exactly what it reported.

The encoding is per string (keys included): `ENCODED_PREFIX` followed by the string with every
backslash, NUL and surrogate written as a `\\uXXXX` escape. A string is encoded when it holds
unstorable text or already starts with the prefix, so every stored string that starts with the
prefix is an encoding and decoding is exact. Encoding is injective, so hashes and fingerprints
taken over encoded values still tell equal values from different ones.

No Django import: the console and the API both use it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

# "␀lw:": visible in the database and in a raw dump, and never the start of ordinary text.
ENCODED_PREFIX = "\u2400lw:"

# What the database cannot hold, as a regex character class's contents written with escapes
# that Python's and ECMA's (JSON Schema's) regexes read alike: the API's schema says it too.
NUL = r"\u0000"
UNSTORABLE_CHARS = NUL + r"\ud800-\udfff"  # NUL and the lone surrogates
_UNSTORABLE = re.compile(f"[{UNSTORABLE_CHARS}]")
_TO_ESCAPE = re.compile("[\\\\\x00\ud800-\udfff]")
_ESCAPE = re.compile(r"\\u([0-9a-f]{4})")


class UnstorableText(ValueError):
    """A string the database cannot hold, at `path` (e.g. "args.items[2]")."""

    def __init__(self, path: str, what: str, *, in_key: bool = False):
        self.path = path or "body"
        self.what = what
        self.in_key = in_key
        where = f"a key in {self.path}" if in_key else self.path
        super().__init__(f"{where} holds {what}, which the database cannot store.")


class TooDeep(ValueError):
    """JSON nested deeper than the limit, first at `path`."""

    def __init__(self, path: str, limit: int):
        self.path = path or "body"
        self.limit = limit
        super().__init__(f"JSON nested deeper than {limit} levels at {self.path}.")


def unstorable(text: str) -> str | None:
    """What in `text` the database cannot hold ("NUL (U+0000)"...), or None if nothing."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    char = found.group()
    if char == "\x00":
        return "a NUL character (U+0000)"
    return f"a lone surrogate (U+{ord(char):04X})"


def _needs_encoding(text: str) -> bool:
    return text.startswith(ENCODED_PREFIX) or _UNSTORABLE.search(text) is not None


def encode_text(text: str) -> str:
    """`text` unchanged when it is storable and unambiguous, else its tagged escaped form."""
    if not _needs_encoding(text):
        return text
    return ENCODED_PREFIX + _TO_ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def decode_text(text: str) -> str:
    if not text.startswith(ENCODED_PREFIX):
        return text
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text[len(ENCODED_PREFIX) :])


def sent_length(text: str) -> int:
    """How many characters `text` had as sent (before `encode_text`)."""
    return len(decode_text(text))


def fit(text: str, limit: int) -> str:
    """Stored text no longer than `limit` characters: `text` itself when it fits, else the
    encoding of the longest start of the text as sent whose encoding fits. A report whose text
    fits its limit as sent is never refused for its encoding's length (each NUL or surrogate
    takes six characters encoded); a column holds as much of it as it can."""
    if len(text) <= limit:
        return text
    sent = decode_text(text)
    end = min(len(sent), limit)
    while end > 0:
        stored = encode_text(sent[:end])
        if len(stored) <= limit:
            return stored
        end -= max(1, (len(stored) - limit) // 6)  # an encoded character is 1 to 6 long
    return ""


def finite_float(text: str) -> float:
    """A JSON number as a float, refused when no float holds it: `1e999` reads as infinity,
    which neither database's JSON accepts (nor NaN, nor the literal Infinity)."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"Out of range float values are not JSON compliant: {text}")
    return value


def refuse_constant(name: str) -> Any:
    """The JSON literals NaN, Infinity and -Infinity: refused (ValueError), as no JSON column
    holds them."""
    raise ValueError(f"Out of range float values are not JSON compliant: {name!r}")


def loads(text: str) -> Any:
    """JSON text as the database can hold it: NaN, Infinity and numbers past a float's range
    are refused (ValueError) rather than read as floats no JSON column takes. The API's
    parser reads numbers and literals with the same two functions."""
    return json.loads(text, parse_constant=refuse_constant, parse_float=finite_float)


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def admit(value: Any, *, max_depth: int, encode: bool) -> Any:
    """Check a parsed JSON body at the boundary; returns it, with strings encoded as needed.

    Raises TooDeep past `max_depth` nested containers (the body itself is level 1), and, unless
    `encode`, UnstorableText at the first unstorable string. Strings that start with
    `ENCODED_PREFIX` are always encoded, so they come back out as they went in. Iterative and
    in place: the body was just parsed and belongs to the caller; nothing recurses.
    """
    if isinstance(value, str):
        return _admit_text(value, "", encode, in_key=False)
    if not isinstance(value, (dict, list)):
        return value
    stack: list[tuple[dict | list, str, int]] = [(value, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if depth > max_depth:
            raise TooDeep(path, max_depth)
        if isinstance(node, dict):
            if any(_needs_encoding(key) for key in node):
                for key in node:
                    _admit_text(key, path, encode, in_key=True)
                items = [(encode_text(key), item) for key, item in node.items()]
                node.clear()
                node.update(items)
            entries: Any = node.items()
        else:
            entries = enumerate(node)
        for key, item in list(entries):
            if isinstance(item, str):
                if _needs_encoding(item):
                    node[key] = _admit_text(item, _child(path, key), encode, in_key=False)
            elif isinstance(item, (dict, list)):
                stack.append((item, _child(path, key), depth + 1))
    return value


def _admit_text(text: str, path: str, encode: bool, *, in_key: bool) -> str:
    if not encode:
        what = unstorable(text)
        if what is not None:
            raise UnstorableText(path, what, in_key=in_key)
    return encode_text(text)


def _transform(value: Any, text: Callable[[str], str]) -> Any:
    """`value` with `text` applied to every string, keys included (iterative, a new copy)."""
    if isinstance(value, str):
        return text(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
    while stack:
        node, parent, slot = stack.pop()
        if isinstance(node, dict):
            copy: Any = {}
            parent[slot] = copy
            for key, item in node.items():
                new_key = text(key) if isinstance(key, str) else key
                _place(item, copy, new_key, stack, text)
        else:
            copy = [None] * len(node)
            parent[slot] = copy
            for index, item in enumerate(node):
                _place(item, copy, index, stack, text)
    return root[0]


def _place(item: Any, parent: Any, slot: Any, stack: list, text: Callable[[str], str]) -> None:
    if isinstance(item, str):
        parent[slot] = text(item)
    elif isinstance(item, (dict, list, tuple)):
        parent[slot] = None
        stack.append((item, parent, slot))
    else:
        parent[slot] = item


def decode(value: Any) -> Any:
    """The value as it was reported: every encoded string (and key) decoded."""
    return _transform(value, decode_text)


def encode(value: Any) -> Any:
    """The value with every string (and key) made storable; `decode` gives it back."""
    return _transform(value, encode_text)


def printable(text: str) -> str:
    """Decoded text for a page: NUL and lone surrogates shown as `\\uXXXX` escapes."""
    return _UNSTORABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", decode_text(text))
