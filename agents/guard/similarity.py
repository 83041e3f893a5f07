"""How alike two calls of one tool are, for the near-duplicate check (docs/DESIGN.md section 4, 10).

Exact repeats are the fingerprint's business; this module scores the drift between two
canonical args texts on 0..1. Two rules hold for every provider:

- Position arguments are identity. A cursor, a page number, an offset, an id or a version that
  differs makes two calls different, however alike the rest is: that is how pagination and
  walking a list of records look, and they are the legitimate work the check must never catch.
- Identifiers decide. Two calls whose identifying values differ (numbers, e-mail addresses,
  quoted names, dates, capitalised names, one-word values) are two pieces of work whatever
  their words say: "remind invoice 42" and "remind invoice 43" score 0 (`identifiers_differ`).
- The score is symmetric and never raises: a text that is not JSON scores by its raw text.

`lexical` is the built-in provider: token and character trigram overlap over the argument
values, no model, a few microseconds per pair. `VectorSimilarity` wraps vectors the service
computed (`semantic`: the embedded model of the `loopwarden[semantic]` extra) or fetched
(`embedding`: an endpoint) before the task row was locked; a pair it has no vector for falls
back to lexical, so a missing model or a failing endpoint never leaves a decision without a
score.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from operator import mul
from types import MappingProxyType
from typing import Any

LEXICAL = "lexical"
EMBEDDING = "embedding"
SEMANTIC = "semantic"
PROVIDERS = (LEXICAL, SEMANTIC, EMBEDDING)
VECTOR_PROVIDERS = (SEMANTIC, EMBEDDING)

# Argument names (lowercased, "_" and "-" dropped) whose value says *where* a call reads, not
# *what* it asks. Any difference in one of them is a real difference. A single `date` picks a
# record like an id does (the weather on the 5th, then on the 12th); a range bound such as
# `since` is not here: widening a range round after round is a nudge, not a new question.
POSITION_FIELDS = frozenset(
    {
        "page", "pageno", "pagenumber", "pagenum", "pagetoken", "nextpagetoken", "cursor",
        "nextcursor", "after", "before", "startingafter", "endingbefore", "offset", "skip",
        "start", "marker", "continuationtoken", "nexttoken", "token", "id", "ids", "uuid",
        "version", "rev", "revision", "etag", "sha", "commit", "ref", "date",
    }
)  # fmt: skip

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Words that carry no meaning of their own in a query: rephrasing adds and drops them freely.
_STOPWORDS = frozenset(
    "a an the of for to in on at by with and or is are was were be do does did how what which "
    "who whose when where why please me my our your about from that this these those it its "
    "as into any all some can could would should".split()
)

# Argument names whose value bounds a range or sizes an answer: moving one round after round
# is the nudge loop the check exists for, so a number or date there is not an identifier.
RANGE_FIELDS = frozenset(
    {
        "since", "until", "from", "to", "startdate", "enddate", "fromdate", "todate", "after",
        "before", "limit", "max", "min", "top", "count", "size", "pagesize", "perpage", "first",
        "last", "maxresults", "maxwords", "maxtokens", "temperature", "timeout", "days", "hours",
    }
)  # fmt: skip

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.UNICODE)
_QUOTED = re.compile(r"'([^']{1,80})'|\"([^\"]{1,80})\"|\u201c([^\u201d]{1,80})\u201d")
_NUMBER = re.compile(r"\d+")
# A capitalised word ("Paris", "Globex"); all-capitals words are keywords as often as names
# (SQL's SELECT, LIMIT), so they are not taken for one.
_NAME = re.compile(r"\b[A-Z][a-z][^\W_]*", re.UNICODE)

Similarity = Callable[[str, str, str, str], float]
"""score(fingerprint_a, args_text_a, fingerprint_b, args_text_b) -> 0..1."""


def _position_key(name: str) -> bool:
    lowered = name.lower()
    flat = lowered.replace("_", "").replace("-", "")
    return (
        flat in POSITION_FIELDS
        or lowered.endswith(("_id", "_ids", "-id"))
        or (name.endswith(("Id", "Ids")) and len(name) > 2)
    )


@lru_cache(maxsize=4096)
def _parsed(args_text: str) -> tuple[tuple[tuple[str, str], ...], frozenset[str], frozenset[str]]:
    """(position fields as (path, canonical value), word tokens, character trigrams).

    Cached by text: the window's entries are scored against every new call of the same tool.
    """
    try:
        value: Any = json.loads(args_text)
    except (ValueError, TypeError):
        value = args_text
    positions: list[tuple[str, str]] = []
    words: list[str] = []
    scalars: list[str] = []

    def walk(node: Any, path: str, key: str) -> None:
        if isinstance(node, dict):
            for name, item in node.items():
                walk(item, f"{path}.{name}", name)
            return
        if key and _position_key(key):
            positions.append((path, json.dumps(node, sort_keys=True, separators=(",", ":"))))
            return
        if isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, f"{path}[{index}]", key)
            return
        if isinstance(node, str):
            words.extend(_stem(w) for w in _WORD.findall(node.lower()) if w not in _STOPWORDS)
        elif node is not None:
            # Numbers and flags are compared whole, tied to their argument: limit=10 and
            # limit=20 differ in one token, not in one character.
            scalars.append(f"{key}={json.dumps(node)}")

    walk(value, "", "")
    text = " ".join(sorted(words))
    grams = {text[i : i + 3] for i in range(max(0, len(text) - 2))}
    return tuple(sorted(positions)), frozenset(words + scalars), frozenset(grams)


def _stem(word: str) -> str:
    """A crude English stem: "refunds", "refunded", "refunding" all read "refund";
    "configure", "configuring", "configuration" read "configur"; "retries" reads "retry"."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    for suffix in ("ation", "ing", "ed", "es", "s", "e"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=4096)
def identifiers(args_text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """The identifying values of a canonical args text, by kind (lowercased, trimmed).

    Found in string values (the numbers and dates of a range bound or a size are a nudge,
    not an identity, see RANGE_FIELDS): e-mail addresses, quoted names, numbers (an invoice
    "INV-1001", an "incident 42", a date "2026-12-01" reads as its numbers), capitalised
    names that do not open the text ("weather in Paris": a sentence's first word is
    capitalised anyway), and an argument whose value is one word (a city, a customer, a
    currency; not a list's items).
    Position fields are compared whole by `positions_differ`.
    """
    try:
        value: Any = json.loads(args_text)
    except (ValueError, TypeError):
        value = args_text
    found: dict[str, set[str]] = {"email": set(), "quoted": set(), "number": set(),
                                  "name": set(), "value": set()}  # fmt: skip

    def text(node: str, key: str, whole: bool, ranged: bool) -> None:
        rest = _EMAIL.sub(" ", node)
        found["email"].update(e.lower() for e in _EMAIL.findall(node))
        for groups in _QUOTED.findall(rest):
            found["quoted"].update(g.strip().lower() for g in groups if g.strip())
        if not ranged:
            found["number"].update(n.lstrip("0") or "0" for n in _NUMBER.findall(rest))
        words = _WORD.findall(rest)
        for index, match in enumerate(_NAME.finditer(rest)):
            name = match.group().lower()
            if (index or match.start() > 0) and name not in _STOPWORDS and not name.isdigit():
                found["name"].add(name)
        if whole and len(words) == 1 and key and not (ranged and any(c.isdigit() for c in rest)):
            found["value"].add(f"{key}={words[0].lower()}")

    def walk(node: Any, key: str, whole: bool) -> None:
        flat = key.lower().replace("_", "").replace("-", "")
        if isinstance(node, dict):
            for name, item in node.items():
                walk(item, name, True)
        elif isinstance(node, list):
            # A list's words are a choice of fields or tags, not one named thing.
            for item in node:
                walk(item, key, False)
        elif isinstance(node, str) and not _position_key(key):
            text(node.strip(), key, whole, flat in RANGE_FIELDS)

    walk(value, "", True)
    return tuple((kind, frozenset(values)) for kind, values in found.items() if values)


def identifiers_differ(a_args: str, b_args: str) -> bool:
    """True when both calls name identifying values of one kind and these differ.

    A kind only one side names says nothing (a rephrase may add "please" or drop a name the
    context already gives); a kind both name and name differently is two pieces of work.
    """
    if a_args == b_args:
        return False
    a, b = _identifiers_by_kind(a_args), _identifiers_by_kind(b_args)
    return any(b.get(kind, values) != values for kind, values in a.items())


@lru_cache(maxsize=4096)
def _identifiers_by_kind(args_text: str) -> Mapping[str, frozenset[str]]:
    """`identifiers` as a mapping, made once per text (a window's entries are compared with
    every new call of their tool). Read only: shared by every caller."""
    return MappingProxyType(dict(identifiers(args_text)))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    shared = len(a & b) if len(a) <= len(b) else len(b & a)
    return shared / (len(a) + len(b) - shared)


def positions_differ(a_args: str, b_args: str) -> bool:
    """True when a cursor, page, offset, id or version differs: never similar then."""
    return _parsed(a_args)[0] != _parsed(b_args)[0]


def lexical(a_args: str, b_args: str) -> float:
    """Token and character-trigram similarity of two canonical args texts, 0..1.

    The mean of the word-token Jaccard (order-free, stemmed, stopwords dropped: a rephrase
    keeps its content words) and the trigram Jaccard over the sorted words (catches typos and
    inflections the crude stem misses). 0 when a position argument differs. Args with no
    words on either side (numbers and flags only) score by their tokens alone: two empty
    trigram sets say nothing about likeness. 0 too when identifying values differ.
    """
    if a_args == b_args:
        return 1.0
    pos_a, words_a, grams_a = _parsed(a_args)
    pos_b, words_b, grams_b = _parsed(b_args)
    if pos_a != pos_b or identifiers_differ(a_args, b_args):
        return 0.0
    if not grams_a and not grams_b:
        return _jaccard(words_a, words_b)
    return (_jaccard(words_a, words_b) + _jaccard(grams_a, grams_b)) / 2


def lexical_score(a_fp: str, a_args: str, b_fp: str, b_args: str) -> float:
    return lexical(a_args, b_args)


def cosine(a: Sequence[float], b: Sequence[float], *, unit: bool = False) -> float | None:
    """Cosine similarity clamped to 0..1 (an opposite direction is simply "not similar"), or
    None when the pair gives no evidence of likeness: vectors of different lengths (the
    endpoint switched models), or a value that is not a finite number (a NaN or inf component,
    or an overflow; clamped, a NaN would compare as 1.0). `unit`: both are known to be of
    length 1 (the embedded model's), so the dot product is the cosine."""
    if len(a) != len(b):
        return None
    if unit and hasattr(a, "dot") and hasattr(b, "dot"):
        # The embedded model's vectors are numpy arrays (its extra brings numpy; this module
        # does not import it): one call, about 1 us a pair against 15-20 in Python.
        dot = float(a.dot(b))
    else:
        # map(mul) rather than a generator, and no lengths for unit vectors.
        dot = sum(map(mul, a, b))
    norm = 1.0 if unit else math.sqrt(sum(map(mul, a, a))) * math.sqrt(sum(map(mul, b, b)))
    if not norm:
        return 0.0
    score = dot / norm
    return max(0.0, min(1.0, score)) if math.isfinite(score) else None


class VectorSimilarity:
    """Cosine over embedding vectors keyed by fingerprint; lexical for a pair it cannot score.

    The vectors were computed or fetched by the service before it locked the task row; a call
    that joined the window since then simply has none and is scored lexically. Position
    fields and identifiers decide first, as for lexical.
    """

    def __init__(self, vectors: Mapping[str, Sequence[float]], *, unit: bool = False):
        self.vectors = vectors
        self.unit = unit

    def __call__(self, a_fp: str, a_args: str, b_fp: str, b_args: str) -> float:
        if a_args == b_args:
            return 1.0
        if positions_differ(a_args, b_args) or identifiers_differ(a_args, b_args):
            return 0.0
        va, vb = self.vectors.get(a_fp), self.vectors.get(b_fp)
        score = cosine(va, vb, unit=self.unit) if va is not None and vb is not None else None
        return lexical(a_args, b_args) if score is None else score


def text_similarity(a: str, b: str) -> float:
    """Similarity of two free texts (plans, reflections): the lexical score of their words.

    Identifiers decide here too: "fetch page 2" and "fetch page 3" are two steps of work.
    """
    if a == b:
        return 1.0
    return lexical(json.dumps(a), json.dumps(b))
