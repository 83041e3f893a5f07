"""The encoding of reported text (agents.db.storable): exact, storable, unambiguous, iterative."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agents.db import storable

# Any code point, surrogates and NUL included, and the encoding's own prefix now and then.
texts = st.one_of(
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF)),
    st.text().map(lambda t: storable.ENCODED_PREFIX + t),
)
values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), texts),
    lambda inner: st.one_of(st.lists(inner), st.dictionaries(texts, inner)),
    max_leaves=30,
)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@given(values)
def test_decode_gives_back_exactly_what_was_encoded(value):
    assert storable.decode(storable.encode(value)) == value


@given(values)
def test_the_encoded_form_holds_only_storable_text(value):
    assert all(storable.unstorable(s) is None for s in _strings(storable.encode(value)))


@given(texts, texts)
def test_different_texts_stay_different(a, b):
    if a != b:
        assert storable.encode_text(a) != storable.encode_text(b)


@given(values)
def test_admit_encodes_like_encode(value):
    copy = json.loads(json.dumps(value))  # admit works in place on a freshly parsed body
    assert storable.admit(copy, max_depth=1000, encode=True) == storable.encode(value)


def test_storable_text_is_left_as_it_is():
    for text in ["", "plain", "é ☃ 😀", "back\\slash", "\u2400 not the prefix"]:
        assert storable.encode_text(text) == text


def test_deep_values_do_not_recurse():
    deep = "leaf\x00"
    for _ in range(20_000):
        deep = [deep]
    decoded = storable.decode(storable.encode(deep))
    for _ in range(20_000):  # compared by hand: == on such a value recurses itself
        assert isinstance(decoded, list) and len(decoded) == 1
        decoded = decoded[0]
    assert decoded == "leaf\x00"


@given(texts, st.integers(min_value=0, max_value=64))
def test_fit_keeps_the_longest_start_of_the_sent_text_its_column_holds(text, limit):
    stored = storable.encode_text(text)

    kept = storable.fit(stored, limit)

    assert len(kept) <= limit
    sent = storable.decode_text(kept)
    assert text.startswith(sent)
    if len(stored) <= limit:
        assert kept == stored
    else:  # one more character would not fit
        assert len(storable.encode_text(text[: len(sent) + 1])) > limit


@given(texts)
def test_the_sent_length_is_the_length_before_encoding(text):
    assert storable.sent_length(storable.encode_text(text)) == len(text)
