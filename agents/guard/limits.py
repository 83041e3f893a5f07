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

from agents.guard.terms import LimitError, Limits
from agents.guard.transitions import is_int, to_decimal

INT_MAX = 2_147_483_647  # PositiveIntegerField on every database Django supports
BIGINT_MAX = 9_223_372_036_854_775_807

# Integer limits and their smallest sensible value. max_retries/max_polls may be 0 (no retry,
# no poll); a cycle has a period of at least 2; everything else needs at least one.
INT_FIELDS: dict[str, int] = {
    "max_model_calls": 1,
    "max_tool_requests": 1,
    "max_tool_executions": 1,
    "max_same_call": 1,
    "max_cycle_period": 2,
    "max_stagnant": 1,
    "max_retries": 0,
    "max_polls": 0,
    "deadline_seconds": 1,
    "max_tokens": 1,
    "lease_seconds": 1,
    "default_estimate_tokens": 1,
}
# Limit-profile fields that a task does not copy (task creation rate per trigger), with their
# smallest sensible value and their default (the task limits' defaults are `Limits()`'s).
PROFILE_INT_FIELDS: dict[str, int] = {
    "max_tasks_per_trigger": 1,
    "trigger_window_seconds": 1,
}
PROFILE_DEFAULTS: dict[str, int] = {
    "max_tasks_per_trigger": 5,
    "trigger_window_seconds": 3600,
}
CHOICES: dict[str, tuple[str, ...]] = {
    "repeat_action": ("block", "stop"),
    "progress_mode": ("evidence", "novelty"),
}
# Money columns hold 14 digits with 6 after the point.
MAX_COST = Decimal("99999999.999999")
COST_PLACES = 6


def largest(name: str) -> int | Decimal:
    """The largest value the limit `name` may hold (its column's)."""
    if name == "max_cost":
        return MAX_COST
    return BIGINT_MAX if name == "max_tokens" else INT_MAX


def decimal_places(amount: Decimal) -> int:
    """How many digits after the point `amount` needs (trailing zeros not counted)."""
    exponent = amount.normalize().as_tuple().exponent
    return -exponent if isinstance(exponent, int) else 0


def _check_int(name: str, value: Any, minimum: int) -> tuple[int | None, str | None]:
    if not is_int(value):
        return None, "Must be an integer."
    top = largest(name)
    if value < minimum:
        return None, f"Must be at least {minimum}."
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
    number = float(value)
    if math.isnan(number) or not 0 <= number <= 1:
        return None, "Must be a number between 0 and 1, or null."
    return number, None


def _check_all(raw: Any, profile: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """(clean values, errors by field) for every field given in `raw`."""
    if not isinstance(raw, dict):
        return {}, {"limits": "Must be an object."}
    ints = dict(INT_FIELDS, **(PROFILE_INT_FIELDS if profile else {}))
    known = set(ints) | set(CHOICES) | {"max_cost", "near_duplicate_threshold"}
    errors: dict[str, str] = {}
    clean: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in known:
            errors[name] = "Unknown limit."
            continue
        checked: int | float | Decimal | str | None
        if name in ints:
            checked, error = _check_int(name, value, ints[name])
        elif name in CHOICES:
            ok = isinstance(value, str) and value in CHOICES[name]
            checked, error = (value, None) if ok else (None, f"One of {', '.join(CHOICES[name])}.")
        elif name == "max_cost":
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
    if name == "max_cycle_period":
        # A longer period catches more cycles: stricter is higher, unlike every other count.
        return None if value >= current else f"May only be raised (profile detects {current})."
    if name == "default_estimate_tokens":
        # A larger reservation for a gate without an estimate is the stricter one.
        return None if value >= current else f"May only be raised (profile reserves {current})."
    if name in INT_FIELDS:
        return None if value <= current else f"May only be lowered (profile allows {current})."
    if name == "max_cost":
        allowed = to_decimal(current)
        return None if value <= allowed else f"May only be lowered (profile allows {allowed})."
    if name == "repeat_action":
        ok = value == current or value == "stop"
        return None if ok else "May only go from block to stop."
    if name == "progress_mode":
        ok = value == current or value == "evidence"
        return None if ok else "May only go from novelty to evidence."
    if name == "near_duplicate_threshold":
        if current is None:
            return None
        if value is None:
            return "May not be disabled; the profile sets it."
        return None if value <= current else f"May only be lowered (profile sets {current})."
    return "Unknown limit."


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
