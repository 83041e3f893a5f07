"""How the console writes a number, an amount of money, a duration and a moment: one format
each, for every page, the report's chart and the views that build text (budget gauges, the
trace). Templates use the filters; Python calls the same functions. Form inputs keep machine
values (900, 5.00), never these texts.

- a count: 200,000
- money: 5.00 USD (settings.LOOPWARDEN_CURRENCY); two decimals, up to six below a cent
- a duration: 850 ms, 1.5 s, 15 min, 2 min 5 s, 2 h 5 min, 3 d 4 h
- a moment: <time datetime="2026-12-04T05:16:03+00:00">2026-12-04 05:16:03 UTC</time>, or
  "5 min ago" in the same element, the full moment in its title
"""

from __future__ import annotations

from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

NONE = "—"
CENT = Decimal("0.01")
MICRO = Decimal("0.000001")


@register.filter
def count(value: Any) -> str:
    """A whole number with thousands separators: 200,000."""
    if value is None or value == "":
        return NONE
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return str(value)
    if number == number.to_integral_value():
        return f"{int(number):,}"
    return f"{number:,f}"


def currency() -> str:
    return settings.LOOPWARDEN_CURRENCY


def money_figure(value: Any) -> str:
    """An amount without its currency (a chart axis names it once): 1,250.00, 0.000125."""
    amount = Decimal(str(value))
    if amount and abs(amount) < CENT:
        small = amount.quantize(MICRO, ROUND_HALF_UP)
        whole, _, fraction = f"{small:f}".partition(".")
        return f"{whole}.{fraction.rstrip('0').ljust(2, '0')}"
    return f"{amount.quantize(CENT, ROUND_HALF_UP):,.2f}"


@register.filter
def money(value: Any) -> str:
    """An amount in the configured currency: 5.00 USD, 0.000125 USD."""
    if value is None or value == "":
        return NONE
    try:
        return f"{money_figure(value)} {currency()}"
    except (InvalidOperation, ValueError):
        return str(value)


@register.filter
def duration(seconds: Any) -> str:
    """A length of time from seconds: 850 ms, 1.5 s, 15 min, 2 min 5 s, 2 h 5 min, 3 d 4 h."""
    if seconds is None or seconds == "":
        return NONE
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        return str(seconds)
    value = max(0.0, value)
    if value < 1:
        return f"{round(value * 1000)} ms"
    if value < 59.995:
        return f"{value:.2f}".rstrip("0").rstrip(".") + " s"
    whole = round(value)
    for big, big_unit, small, small_unit in (
        (86400, "d", 3600, "h"),
        (3600, "h", 60, "min"),
        (60, "min", 1, "s"),
    ):
        if whole >= big:
            first, rest = divmod(whole, big)
            rest //= small
            return f"{first} {big_unit} {rest} {small_unit}" if rest else f"{first} {big_unit}"
    return f"{whole} s"  # pragma: no cover (60 s and more took a branch above)


def moment_text(value: datetime) -> str:
    """2026-12-04 05:16:03 UTC: date, time and the console's time zone."""
    local = timezone.localtime(value)
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


@register.filter
def moment(value: datetime | None) -> SafeString | str:
    """A moment as a <time> element: its ISO form for machines, date, time and zone to read."""
    if not value:
        return NONE
    return format_html('<time datetime="{}">{}</time>', value.isoformat(), moment_text(value))


def ago_text(value: datetime, now: datetime | None = None) -> str:
    seconds = int(((now or timezone.now()) - value).total_seconds())
    if seconds < 0:
        return "just now"
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    return moment_text(value)


@register.filter
def ago(value: datetime | None) -> SafeString | str:
    """How long ago, in a <time> element whose title is the full moment ("5 min ago"); past a
    day, the moment itself."""
    if not value:
        return NONE
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        moment_text(value),
        ago_text(value),
    )


def is_money(name: str) -> bool:
    return name in {"cost", "max_cost", "daily_cost_cap"}


def is_seconds(name: str) -> bool:
    return name == "seconds" or name.endswith("_seconds")


@register.filter
def limit_shown(value: Any, name: str) -> str:
    """A limit, a grant or a usage named `name` in its format: max_cost as money, a
    *_seconds limit as a duration, a whole number as a count; a dash for "off"."""
    if value is None or value == "":
        return NONE
    if isinstance(value, bool):
        return str(value)
    if is_money(name):
        return money(value)
    if is_seconds(name):
        return duration(value)
    if isinstance(value, int | Decimal) or (isinstance(value, str) and value.isdigit()):
        return count(value)
    return str(value)
