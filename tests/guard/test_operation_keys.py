"""The operation key rule (`agents.guard.keys`): compared in NFC; a key holding a character
that shows nothing is refused."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.guard.keys import InvalidOperationKey, operation_key

INVISIBLE_CATEGORIES = {"Cc", "Cf", "Zl", "Zp"}


def test_every_control_format_and_separator_character_is_refused():
    """Unicode's categories as this Python knows them, every code point of them."""
    found = [
        chr(code)
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in INVISIBLE_CATEGORIES
    ]
    assert len(found) > 200
    for character in found:
        with pytest.raises(InvalidOperationKey):
            operation_key(f"pay{character}1")


@pytest.mark.parametrize(
    "character",
    ["\u034f", "\u115f", "\u17b4", "\u180b", "\u3164", "\ufe0f", "\uffa0", "\U000e0100"],
)
def test_the_other_default_ignorable_characters_are_refused(character):
    with pytest.raises(InvalidOperationKey, match=f"U\\+{ord(character):04X}"):
        operation_key(f"pay{character}1")


def test_composed_and_decomposed_spellings_are_one_key():
    assert operation_key("pay-cafe\u0301-1") == operation_key("pay-caf\u00e9-1") == "pay-café-1"
    assert operation_key("Å-ﬁ") == "Å-ﬁ"  # NFC, not NFKC: a compatibility form stays


@given(st.text(st.characters(exclude_categories=("Cc", "Cf", "Zl", "Zp", "Cs"))))
def test_a_key_is_taken_as_its_nfc_form(text):
    try:
        key = operation_key(text)
    except InvalidOperationKey:  # a default-ignorable character of another category
        return
    assert key == unicodedata.normalize("NFC", text)
    assert operation_key(unicodedata.normalize("NFD", text)) == key
