"""What counts as blank text: one rule for the API's schema, its validators and the services.

A required text (a reason, a note, a tool's name) must hold a character besides white space.
The class of white space is spelled out because `\\s` and `str.strip()` differ between Python
(which also counts \\x1c-\\x1f and \\x85 as space) and the ECMA regexes of JSON Schema
validators: this one pattern means the same to the server and to its clients, so whatever the
schema allows a service takes.

No Django import: the API's fields and every service use it.
"""

from __future__ import annotations

import re

SPACE_CHARS = r"\t\n\x0b\x0c\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
NOT_SPACE = f"[^{SPACE_CHARS}]"
_NOT_SPACE = re.compile(NOT_SPACE)


def blank(text: str | None) -> bool:
    """Whether `text` is missing, empty or white space only (as the schema's pattern says)."""
    return not text or _NOT_SPACE.search(text) is None
