"""The one redaction policy for what operators read: console, operator API, report.json, the
daily CSV, notifications and the audit log.

Pure Python, no Django import. It returns a masked copy; the stored args, results, goals, keys
and reports are never touched, so REUSE still hands the agent the real committed result and an
agent reading its own task gets what it sent.

Three rules, applied to every key and string of a JSON value, at any depth:

1. Key names that say "secret", matched whatever their case or separators (`Private-Key`,
   `privateKey`, `PRIVATE_KEY` and `private.key` are one name). Distinctive words are found
   anywhere in the name (`x_api_key_v2`); short ones (`auth`, `pwd`, `pin`, `token`) only as a
   whole word of it, so `author` and `max_tokens` stay readable.
2. Secret shapes inside any text, whatever the key: the `SHAPES` below (cloud and SaaS keys,
   tokens, webhook URLs, private key blocks, a password in a URL, `name=value` text whose name
   is a rule-1 name or whose value looks random) and card numbers passing the Luhn check.
   Only the secret part of a text is masked; what surrounds it stays readable.
3. Per-tool key names an admin adds in the tool policy (`ToolPolicy.redact_fields`), matched
   like rule 1 names.

`SHAPES` is a compiled pattern list rather than detect-secrets' plugins: it finds spans to mask
(the plugins answer which values are secrets, line by line) and is many times faster on a
console page's texts (docs/BENCHMARKS.md, "Secret redaction").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

MASK = "•••"

# Rule 1. Found anywhere in the normalized name (lowercase, separators removed).
SECRET_PARTS = (
    "password", "passwd", "passphrase", "secret", "credential", "privatekey", "accesskey",
    "apikey", "secretkey", "authorization", "cookie", "session", "bearer", "accesstoken",
    "refreshtoken", "idtoken", "authtoken", "cardnumber", "creditcard", "clientsecret",
    "signingkey", "encryptionkey", "accountkey", "sharedaccesskey",
)  # fmt: skip
# Rule 1. Only as a whole word of the name (split at separators and camelCase humps).
SECRET_WORDS = frozenset(
    {"auth", "pwd", "pass", "token", "pin", "cvv", "cvc", "ssn", "otp", "jwt", "card", "iban"}
)

_SEPARATORS = re.compile(r"[\s_\-.:/]+")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

# Rule 2: (name, literals, pattern), applied in this order. A shape runs only on a text that
# holds one of its literals (a substring test: most texts hold none, which keeps a page's
# hundreds of texts cheap). A pattern with a group `secret` masks only that group; the others
# mask the whole match.
_B64 = r"A-Za-z0-9+/"
SHAPES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("PEM private key block", ("PRIVATE KEY",),
     r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY"
     r"(?: BLOCK)?-----|.*)"),
    ("password in a URL", ("://",),
     r"\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@\"'<>]*:(?P<secret>[^\s/@\"'<>]+)@"),
    ("Slack webhook URL", ("hooks.slack.com",),
     r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_\-]+"),
    ("Discord webhook URL", ("/api/webhooks/",),
     r"https://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]+"),
    ("AWS access key id", ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
     r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b"),
    ("Azure storage account key", ("==",), rf"\b[{_B64}]{{86}}==(?![{_B64}=])"),
    ("SendGrid API key", ("SG.",), r"\bSG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}"),
    ("Slack token", ("xox", "xapp-"),
     r"\bxox[abposr]-[A-Za-z0-9\-]{10,}|\bxapp-\d-[A-Za-z0-9\-]{10,}"),
    ("Stripe key", ("_live_", "_test_", "whsec_"),
     r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}|\bwhsec_[A-Za-z0-9]{24,}"),
    ("OpenAI and Anthropic API keys", ("sk-",),
     r"\bsk-(?:ant-|proj-|svcacct-|admin-|live-|test-)?[A-Za-z0-9_\-]{20,}"),
    ("sk/pk/rk-prefixed key", ("sk_", "sk-", "pk_", "pk-", "rk_", "rk-"),
     r"\b(?:sk|pk|rk)[-_](?:live|test|proj)?[-_]?[A-Za-z0-9_\-]{16,}"),
    ("GitHub token", ("gh", "github_pat_"),
     r"\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
    ("GitLab token", ("gl",),
     r"\bgl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent)-[A-Za-z0-9_\-]{20,}"),
    ("Twilio key", ("AC", "SK"), r"\b(?:AC|SK)[0-9a-f]{32}\b"),
    ("Mailchimp API key", ("-us",), r"\b[0-9a-f]{32}-us[0-9]{1,2}\b"),
    ("JSON Web Token", ("eyJ",), r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"),
    ("npm token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("PyPI token", ("pypi-",), r"\bpypi-[A-Za-z0-9_\-]{40,}"),
    ("Discord bot token", (".",),
     r"\b[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}\b"),
    ("Telegram bot token", (":AA",), r"\b\d{8,10}:AA[A-Za-z0-9_\-]{32,33}\b"),
    ("Square token", ("sq0", "EAAA"),
     r"\bsq0(?:atp|csp|idp)-[A-Za-z0-9_\-]{22,43}\b|\bEAAA[A-Za-z0-9_\-]{60}\b"),
    ("Google API key", ("AIza",), r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("Hugging Face token", ("hf_",), r"\bhf_[A-Za-z]{34}\b"),
    ("Shopify token", ("shp",), r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    ("DigitalOcean token", ("_v1_",), r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
    ("Loopwarden token", ("lw_",), r"\blw_[A-Za-z0-9_\-]{20,}"),
    ("Authorization header", ("Bearer", "Basic", "Token", "Digest", "bearer", "basic", "token"),
     r"(?i:\b(?:Bearer|Basic|Token|Digest))\s+(?P<secret>[A-Za-z0-9._~+/=\-]{8,})"),
    # `name=value`, `name: value`, `"name": "value"`: masked when the name is a rule-1 name or
    # the value looks random (`looks_random`). A URL's scheme is not a name (`https:` followed
    # by `//`): read as one, the whole URL was its value, and its query was never looked at.
    ("secret name=value", ("=", ":"),
     r"\b(?P<name>[A-Za-z_][A-Za-z0-9_.\-]{0,63})[\"']?[ \t]*[:=](?!//)[ \t]*"
     r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|(?:(?:Bearer|Basic|Token)[ \t]+)?[^\s\"',;&<>]+)"),
)  # fmt: skip

_PATTERNS = tuple(re.compile(pattern, re.DOTALL) for _name, _literals, pattern in SHAPES)
_LITERALS = tuple((literal, index) for index, shape in enumerate(SHAPES) for literal in shape[1])
_ASSIGNMENT = len(SHAPES) - 1
# No look-behind at its start, so the engine skips to the next digit: `_card` turns down a run
# that a digit precedes instead (four times faster on ordinary text).
_CARD = re.compile(r"\d(?:[ \-]?\d){12,18}(?!\d)")
_SCHEME = re.compile(r"((?:Bearer|Basic|Token)[ \t]+)?(.*)", re.DOTALL)
_RANDOM_VALUE = re.compile(r"[A-Za-z0-9+/=_\-]{20,}")
# How deep a value is read for assignments inside it (a URL in a URL's query is two).
_NESTED = 3


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


def looks_random(value: str) -> bool:
    """A key-like value: 20+ characters of the base64/URL alphabet mixing upper and lower case
    and digits, with a character entropy above 3.5 bits (words, ids, hex digests and dates
    stay readable)."""
    if not _RANDOM_VALUE.fullmatch(value):
        return False
    if not (any(c.isupper() for c in value) and any(c.islower() for c in value)):
        return False
    if not any(c.isdigit() for c in value):
        return False
    counts = {char: value.count(char) for char in set(value)}
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy > 3.5


def _masked(match: re.Match[str]) -> str:
    """The match masked: only its `secret` group when it has one."""
    if "secret" not in match.re.groupindex or match.group("secret") is None:
        return MASK
    start, end = match.span("secret")
    whole, offset = match.group(0), match.start()
    return whole[: start - offset] + MASK + whole[end - offset :]


class RedactionPolicy:
    """Rules 1-3 with a tool's extra field names; `apply` returns a masked copy."""

    def __init__(self, extra_fields: Iterable[str] = ()):
        self.extra = frozenset(normalize(f) for f in extra_fields if str(f).strip())
        self._judged: dict[Any, bool] = {}  # key names repeat on a page: each is judged once

    def secret_key(self, name: Any) -> bool:
        judged = self._judged.get(name)
        if judged is None:
            flat = normalize(name)
            judged = (
                flat in self.extra
                or any(part in flat for part in SECRET_PARTS)
                or any(word in SECRET_WORDS for word in _words(str(name)))
            )
            if len(self._judged) < 10_000:
                self._judged[name] = judged
        return judged

    def mask_text(self, text: str) -> str:
        """`text` with every secret shape in it masked."""
        if len(text) < 8:  # no shape is shorter
            return text
        for index in sorted({index for literal, index in _LITERALS if literal in text}):
            mask = self._assignment if index == _ASSIGNMENT else _masked
            text = _PATTERNS[index].sub(mask, text)
        return _CARD.sub(self._card, text)

    def _assignment(self, match: re.Match[str], depth: int = 0) -> str:
        whole, value = match.group(0), match.group("value")
        quote = value[0] if value[:1] in ("'", '"') and len(value) > 1 else ""
        inner = value[1:-1] if quote else value
        scheme, rest = _SCHEME.fullmatch(inner).groups()  # type: ignore[union-attr]
        if rest and rest != MASK and (self.secret_key(match.group("name")) or looks_random(rest)):
            return f"{whole[: len(whole) - len(value)]}{quote}{scheme or ''}{MASK}{quote}"
        if depth < _NESTED and ("=" in value or ":" in value):
            # A value that is not a secret may hold assignments of its own: a URL given as a
            # value (`url=https://x/export?token=...`), or in a URL's query (`?next=...`).
            nested = _PATTERNS[_ASSIGNMENT].sub(lambda m: self._assignment(m, depth + 1), value)
            return whole[: len(whole) - len(value)] + nested
        return whole

    @staticmethod
    def _card(match: re.Match[str]) -> str:
        start = match.start()
        if start and match.string[start - 1].isdigit():  # the tail of a longer number
            return match.group(0)
        digits = re.sub(r"\D", "", match.group(0))
        return MASK if _luhn(digits) else match.group(0)

    def apply(self, value: Any) -> Any:
        if isinstance(value, dict):
            masked = {}
            for key, item in value.items():
                shown = self.mask_text(key) if isinstance(key, str) else key  # a key may be one
                masked[shown] = MASK if self.secret_key(key) else self.apply(item)
            return masked
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
    """A masked copy of `value` under the policy, with a tool's extra field names: the one
    function every place an operator reads calls."""
    policy = RedactionPolicy(extra_fields) if extra_fields else DEFAULT
    return policy.apply(value)


def masked_search_text(goal: str, external_ref: str) -> str | None:
    """What the console's search reads of a task whose goal or external_ref holds a secret:
    both as an operator sees them, masked, one line each. None when masking changes neither
    (nearly every task), so the search reads the raw columns.

    Searching the raw text would let anyone who may search read a secret one character at a
    time, though every page shows it masked.
    """
    shown = DEFAULT.mask_text(goal), DEFAULT.mask_text(external_ref)
    return "\n".join(shown) if shown != (goal, external_ref) else None
