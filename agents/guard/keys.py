"""Operation keys: two keys that look the same are the same key.

A key is taken in Unicode NFC, so its composed and decomposed spellings (`café` as é, or as e
and a combining accent) name one ledger row. A key holding a character that shows nothing is
refused: a control character, a format character (the zero-width ones, the bidirectional
marks, embeddings, overrides and isolates, the soft hyphen), a line or paragraph separator, or
another default-ignorable code point (variation selectors, fillers, tags). Any of them would
make a key that looks like a committed one differ from it, and execute again.
"""

from __future__ import annotations

import re
import unicodedata

# Unicode's Cc, Cf, Zl and Zp code points and its Default_Ignorable_Code_Point property
# (Unicode 15), as ranges of a regular expression's character class.
_INVISIBLE = (
    "\x00-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
# A pattern any refused key matches somewhere (for a JSON Schema `not`: unanchored, so it
# means the same to ECMA-262 and to Python, whatever they make of `$`).
REFUSED_PATTERN = f"[{_INVISIBLE}]"
_REFUSED = re.compile(REFUSED_PATTERN)


class InvalidOperationKey(ValueError):
    """The key holds a character that shows nothing."""


def operation_key(key: str) -> str:
    """`key` as the ledger compares it: its NFC form. InvalidOperationKey when it holds a
    control, zero-width, bidirectional-format or other invisible character."""
    found = _REFUSED.search(key)
    if found is not None:
        raise InvalidOperationKey(
            f"An operation key may not hold U+{ord(found.group()):04X} "
            f"({unicodedata.name(found.group(), 'a control character')}): control, "
            "zero-width and bidirectional-format characters would make keys that look the "
            "same differ."
        )
    if unicodedata.is_normalized("NFC", key):
        return key
    return unicodedata.normalize("NFC", key)
