"""Small helpers for the console templates (numbers, money, durations and moments are
`console_formats`)."""

from __future__ import annotations

from django import template

from agents.db import storable
from agents.redaction import redact
from agents.selectors import Redactor
from console import words
from console.timeline import args_text, shown_json
from ledger.selectors import operations_waiting_verdict

register = template.Library()


@register.filter
def state_words(state: str) -> str:
    return words.state_words(state)


@register.filter
def reason_words(reason: str) -> str:
    return words.reason_words(reason) if reason else ""


@register.filter
def event_words(kind: str) -> str:
    return words.EVENT_WORDS.get(kind, kind.replace("_", " "))


@register.filter
def limit_words(name: str) -> str:
    return words.LIMIT_WORDS.get(name, name)


@register.filter
def css(value: str) -> str:
    """A state or decision as a CSS class: NEEDS_HUMAN -> needs-human."""
    return str(value or "").lower().replace("_", "-")


@register.filter
def who(actor: str) -> str:
    """'user:alice' -> 'alice'; agents and the system keep their prefix, it says what they are."""
    return actor[5:] if actor and actor.startswith("user:") else (actor or "—")


@register.filter
def short_args(value, tool: str = "") -> str:
    """Args or a result on one line, masked by the redaction policy (with `tool`'s fields)."""
    return args_text(value, Redactor().policy(tool or ""))


@register.filter
def redacted(value):
    """Text an agent wrote (a goal, an operation key, a reason), masked by the redaction
    policy; a list (the report's `completed`) item by item."""
    return redact(value)


@register.filter
def pretty_json(value) -> str:
    return shown_json(value, indent=2)


@register.filter
def printable(value):
    """Reported text as the agent sent it, NUL and lone surrogates shown as escapes; a list
    (the report's `completed`) item by item."""
    if isinstance(value, list):
        return [storable.printable(item) if isinstance(item, str) else item for item in value]
    return storable.printable(value) if isinstance(value, str) else value


@register.filter
def get(mapping, key):
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def get_attr(obj, name: str):
    return getattr(obj, name, None)


@register.simple_tag
def reconcile_count() -> int:
    """Operations waiting for a verdict, for the navigation badge (one indexed count)."""
    return operations_waiting_verdict().count()


@register.simple_tag(takes_context=True)
def query_with(context, **changes) -> str:
    """The current query string with some parameters replaced (for pagination links)."""
    params = context["request"].GET.copy()
    for key, value in changes.items():
        if value in (None, ""):
            params.pop(key, None)
        else:
            params[key] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"
