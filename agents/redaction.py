"""The one redaction policy for what operators read: the console and the operator API.

Pure Python, no Django import. It returns a masked copy; the stored args, results and ledger
rows are never touched, so REUSE still hands the agent the real committed result.

Three rules, applied to every key and string of a JSON value, at any depth:

1. Key names that say "secret", matched whatever their case or separators (`Private-Key`,
   `privateKey`, `PRIVATE_KEY` and `private.key` are one name). Distinctive words are found
   anywhere in the name (`x_api_key_v2`); short ones (`auth`, `pwd`, `pin`, `token`) only as a
   whole word of it, so `author` and `max_tokens` stay readable.
2. Value shapes, whatever the key: API keys (`sk-...`, `ghp_...`, `AKIA...`, `xoxb-...`, our own
   `lw_...`), bearer tokens and JWTs, card numbers (13 to 19 digits passing the Luhn check).
   Only the matching part of a string is masked.
3. Per-tool key names an admin adds in the tool policy (`ToolPolicy.redact_fields`), matched
   like rule 1 names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MASK = "•••"

# Rule 1. Found anywhere in the normalized name (lowercase, separators removed).
SECRET_PARTS = (
    "password", "passwd", "passphrase", "secret", "credential", "privatekey", "accesskey",
    "apikey", "secretkey", "authorization", "cookie", "session", "bearer", "accesstoken",
    "refreshtoken", "idtoken", "authtoken", "cardnumber", "creditcard", "clientsecret",
    "signingkey", "encryptionkey",
)  # fmt: skip
# Rule 1. Only as a whole word of the name (split at separators and camelCase humps).
SECRET_WORDS = frozenset(
    {"auth", "pwd", "pass", "token", "pin", "cvv", "cvc", "ssn", "otp", "jwt", "card", "iban"}
)

_SEPARATORS = re.compile(r"[\s_\-.:/]+")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

# Rule 2.
_API_KEY = re.compile(
    r"\b(?:sk|pk|rk)[-_](?:live|test|proj)?[-_]?[A-Za-z0-9_\-]{16,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bxox[abpsr]-[A-Za-z0-9\-]{10,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\bAIza[0-9A-Za-z_\-]{30,}"
    r"|\blw_[A-Za-z0-9_\-]{20,}"
)
_BEARER = re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*")
_CARD = re.compile(r"(?<![\d])(?:\d[ \-]?){12,18}\d(?![\d])")


def normalize(name: str) -> str:
    """`Private-Key`, `privateKey` and `private_key` are all `privatekey`."""
    return _SEPARATORS.sub("", str(name)).lower()


def _words(name: str) -> list[str]:
    return [w.lower() for part in _SEPARATORS.split(str(name)) for w in _WORDS.findall(part)]


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        number = int(char)
        if index % 2:
            number = number * 2 - 9 if number > 4 else number * 2
        total += number
    return total % 10 == 0


class RedactionPolicy:
    """Rules 1-3 with a tool's extra field names; `apply` returns a masked copy."""

    def __init__(self, extra_fields: Iterable[str] = ()):
        self.extra = frozenset(normalize(f) for f in extra_fields if str(f).strip())

    def secret_key(self, name: Any) -> bool:
        flat = normalize(name)
        if flat in self.extra or any(part in flat for part in SECRET_PARTS):
            return True
        return any(word in SECRET_WORDS for word in _words(str(name)))

    def mask_text(self, text: str) -> str:
        text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
        text = _JWT.sub(MASK, text)
        text = _API_KEY.sub(MASK, text)

        def card(match: re.Match[str]) -> str:
            digits = re.sub(r"\D", "", match.group(0))
            return MASK if 13 <= len(digits) <= 19 and _luhn(digits) else match.group(0)

        return _CARD.sub(card, text)

    def apply(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: MASK if self.secret_key(key) else self.apply(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [self.apply(item) for item in value]
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            digits = str(value)  # a card number sent as a JSON number
            return MASK if 13 <= len(digits) <= 19 and _luhn(digits) else value
        return value


DEFAULT = RedactionPolicy()


def redact(value: Any, extra_fields: Iterable[str] = ()) -> Any:
    """A masked copy of `value` under the policy, with a tool's extra field names."""
    policy = RedactionPolicy(extra_fields) if extra_fields else DEFAULT
    return policy.apply(value)
