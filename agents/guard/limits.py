"""Validating limits: admins set them freely within sane ranges, agents may only tighten.

An agent supplying its own limits at task creation must not be able to buy itself more room
than its profile gives; otherwise the profile is advice, not a limit. Every rule below is
phrased as "what counts as stricter" for that field.
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from typing import Any

from agents.guard.registry import (
    BY_NAME,
    CHOICE,
    COST_PLACES,
    HIGHER,
    MAX_COST,
    MONEY,
    PROFILE_DEFAULTS,
    WHOLE,
    Limit,
)
from agents.guard.terms import LimitError, Limits
from agents.guard.transitions import is_int, to_decimal


def largest(name: str) -> int | Decimal:
    """The largest value the whole number or money limit `name` may hold (its column's)."""
    top = BY_NAME[name].maximum
    assert isinstance(top, (int, Decimal)), name
    return top


def decimal_places(amount: Decimal) -> int:
    """How many digits after the point `amount` needs (trailing zeros not counted)."""
    exponent = amount.normalize().as_tuple().exponent
    return -exponent if isinstance(exponent, int) else 0


def _check_int(spec: Limit, value: Any) -> tuple[int | None, str | None]:
    if not is_int(value):
        return None, "Must be an integer."
    top = largest(spec.name)
    if value < spec.minimum:
        return None, f"Must be at least {spec.minimum}."
    if value > top:
        return None, f"Must be at most {top}."
    return value, None


def _check_cost(value: Any) -> tuple[Decimal | None, str | None]:
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        return None, "Must be a decimal amount."
    try:
        amount = to_decimal(value)
    except ValueError:
        return None, "Must be a decimal amount."
    if not amount.is_finite():
        return None, "Must be a finite amount."
    if amount < 0:
        return None, "Must be at least 0."
    if amount > MAX_COST:
        return None, f"Must be at most {MAX_COST}."
    if decimal_places(amount) > COST_PLACES:
        return None, f"At most {COST_PLACES} decimal places."
    return amount, None


def _check_threshold(value: Any) -> tuple[float | None, str | None]:
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None, "Must be a number between 0 and 1, or null."
    try:
        number = float(value)
    except OverflowError:  # a JSON integer too large for a float: far outside 0..1 anyway
        return None, "Must be a number between 0 and 1, or null."
    if math.isnan(number) or not 0 <= number <= 1:
        return None, "Must be a number between 0 and 1, or null."
    return number, None


def _check_all(raw: Any, profile: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """(clean values, errors by field) for every field given in `raw`."""
    if not isinstance(raw, dict):
        return {}, {"limits": "Must be an object."}
    errors: dict[str, str] = {}
    clean: dict[str, Any] = {}
    for name, value in raw.items():
        spec = BY_NAME.get(name)
        if spec is None or (spec.profile_only and not profile):
            errors[name] = "Unknown limit."
            continue
        checked: int | float | Decimal | str | None
        if spec.kind in WHOLE:
            checked, error = _check_int(spec, value)
        elif spec.kind == CHOICE:
            ok = isinstance(value, str) and value in spec.choices
            checked, error = (value, None) if ok else (None, f"One of {', '.join(spec.choices)}.")
        elif spec.kind == MONEY:
            checked, error = _check_cost(value)
        else:
            checked, error = _check_threshold(value)
        if error:
            errors[name] = error
        else:
            clean[name] = checked
    return clean, errors


def validate_limits(raw: dict[str, Any], partial: bool, *, profile: bool = False) -> dict[str, Any]:
    """Types and ranges of limits an admin sets (no tighten rule). Raises LimitError.

    Returns clean values (int, Decimal for max_cost, float or None for the threshold) that
    `Limits.from_dict` accepts. With `partial` only the given fields come back (a PATCH);
    without, missing fields are filled with the section 5 defaults. `profile=True` also
    accepts the two profile-only fields (max_tasks_per_trigger, trigger_window_seconds).
    """
    clean, errors = _check_all(raw, profile)
    if errors:
        raise LimitError(errors)
    if not partial:
        defaults: dict[str, Any] = {**Limits().to_dict(), "max_cost": Limits().max_cost}
        if profile:
            defaults.update(PROFILE_DEFAULTS)
        clean = {**defaults, **clean}
    return clean


def _tighten_error(name: str, value: Any, base: Limits) -> str | None:
    """None when `value` is at least as strict as the profile's value for `name`."""
    current = getattr(base, name)
    spec = BY_NAME[name]
    if spec.kind == CHOICE:
        if value == current or value == spec.stricter:
            return None
        looser = next(choice for choice in spec.choices if choice != spec.stricter)
        return f"May only go from {looser} to {spec.stricter}."
    if current is None:  # a ratio that is off: any value turns it on
        return None
    if value is None:
        return f"May not be disabled; the profile {spec.says} it."
    if spec.kind == MONEY:
        current = to_decimal(current)
    if spec.stricter == HIGHER:
        verb = "raised"
        ok = value >= current
    else:
        verb = "lowered"
        ok = value <= current
    return None if ok else f"May only be {verb} (profile {spec.says} {current})."


def tighten_limits(base: Limits, requested: dict[str, Any] | None) -> Limits:
    """The profile's limits with the agent's requested changes, each only ever stricter.

    Raises LimitError naming every offending field, so the agent can fix all of them at once.
    The profile-only trigger fields are not the agent's to set and count as unknown here.
    """
    if requested is None:
        return replace(base)
    clean, errors = _check_all(requested, profile=False)
    for name, value in clean.items():
        error = _tighten_error(name, value, base)
        if error is not None:
            errors[name] = error
    if errors:
        raise LimitError(errors)
    return replace(base, **clean)
