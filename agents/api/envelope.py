"""The decision bodies' envelopes checked without DRF's per-field machinery, rules unchanged.

A decision body (a gate, a usage report, a tool request, a tool result) is validated on every
model call and tool execution of every agent; through DRF's serializer that cost about as much
as the decision's rules, its ledger and its log line together. Here the serializer's own
declared fields are read once (`plan`) and a body is checked against what they declare:

- the field kinds the decision bodies use, and only those: `StrictStr`, `OperationKey` (its
  NFC form checked as a `StrictStr`), `StrictInt`, a `ChoiceField`, `JSONObject`, `AnyJSON`
  and a list of a nested `Strict` serializer;
- what each declares: required, default, allow_blank, allow_null, max_length, min_value,
  max_value, choices, and the validators DRF and `StrictStr` attach for those.

A body every check accepts yields what the serializer's `validated_data` would be. Anything
else (a wrong type, a bound crossed, an unknown field, a string the database cannot hold, a
serializer or field this module does not know) yields None, and the caller asks the
serializer itself, which answers with its own 400. So the rules stay where they are declared,
in `agents.api.serializers`, and every refusal is still DRF's; a test compares the two on
every kind of value for every field.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from rest_framework import serializers
from rest_framework.fields import (
    ProhibitNullCharactersValidator,
    ProhibitSurrogateCharactersValidator,
    empty,
)

from agents.api.fields import (
    NOT_BLANK,
    AnyJSON,
    JSONObject,
    OperationKey,
    SentMaxLengthValidator,
    StrictInt,
    StrictStr,
)
from agents.db import storable
from agents.guard import keys
from agents.text import blank

# NUL and lone surrogates: what DRF's CharField validators refuse (and storable's rule).
_REFUSED_CHARACTERS = re.compile("[\x00\ud800-\udfff]")

# A field's check: the value sent, or `empty` when absent -> (take it, value to keep).
# Raises _Refused for anything the serializer must judge itself.
Check = Callable[[Any], tuple[bool, Any]]


class _Refused(Exception):
    """Not accepted here: the serializer decides (and words the 400)."""


class _Unknown(Exception):
    """A field or serializer this module does not read: always the serializer's."""


_PLANS: dict[type, Callable[[Any], dict] | None] = {}


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict | None:
    """What `serializer_class(data=data).validated_data` would be, or None: ask the serializer."""
    plan = _PLANS.get(serializer_class, empty)
    if plan is empty:
        plan = _PLANS[serializer_class] = _plan_or_none(serializer_class)
    if plan is None:
        return None
    try:
        return plan(data)
    except _Refused:
        return None


def _plan_or_none(serializer_class: type[serializers.Serializer]) -> Callable[[Any], dict] | None:
    if not getattr(serializer_class, "shared_fields", False):  # only the decision bodies
        return None
    try:
        return plan(serializer_class())
    except _Unknown:
        return None


def plan(serializer: serializers.Serializer) -> Callable[[Any], dict]:
    """The check of a whole body for `serializer` (raises _Unknown for what it cannot read)."""
    from agents.api.serializers import Strict

    kind = type(serializer)
    if (
        not isinstance(serializer, Strict)
        or kind.validate is not serializers.Serializer.validate
        or kind.to_internal_value is not Strict.to_internal_value
        or serializer.validators
        or any(hasattr(serializer, f"validate_{name}") for name in serializer.fields)
    ):
        raise _Unknown(kind.__name__)
    checks = [(name, _field_check(field)) for name, field in serializer.fields.items()]
    names = frozenset(name for name, _check in checks)

    def check_body(data: Any) -> dict:
        if type(data) is not dict or not names.issuperset(data):
            raise _Refused
        out = {}
        for name, check in checks:
            keep, value = check(data.get(name, empty))
            if keep:
                out[name] = value
        return out

    return check_body


def _field_check(field: serializers.Field) -> Check:
    if field.read_only or field.source != field.field_name:
        raise _Unknown(field.field_name)
    kind = type(field)
    if kind is serializers.ListSerializer:
        value_check = _list_check(field)
    elif kind is StrictStr:
        value_check = _text_check(field)
    elif kind is OperationKey:
        value_check = _key_check(field)
    elif kind is StrictInt:
        value_check = _int_check(field)
    elif kind is serializers.ChoiceField:
        value_check = _choice_check(field)
    elif kind is JSONObject:
        _only_validators(field)
        value_check = _object_check
    elif kind is AnyJSON:
        _only_validators(field)
        value_check = _any_check
    else:
        raise _Unknown(field.field_name)
    return _presence(field, value_check)


def _presence(field: serializers.Field, value_check: Callable[[Any], Any]) -> Check:
    """Absent and null values as DRF's `validate_empty_values` and `get_default` take them."""
    required, allow_null, default = field.required, field.allow_null, field.default
    if default is not empty and callable(default) and getattr(default, "requires_context", False):
        raise _Unknown(field.field_name)

    def check(value: Any) -> tuple[bool, Any]:
        if value is empty:
            if required:
                raise _Refused
            if default is empty:
                return False, None
            return True, default() if callable(default) else default
        if value is None:
            if not allow_null:
                raise _Refused
            return True, None
        return True, value_check(value)

    return check


def _only_validators(field: serializers.Field, *known: type) -> list[Any]:
    """The field's validators, each of a kind in `known` (or NOT_BLANK itself)."""
    for validator in field.validators:
        if validator is not NOT_BLANK and type(validator) not in known:
            raise _Unknown(field.field_name)
    return field.validators


def _bound(field: serializers.Field, kind: type) -> Any:
    limits = [v.limit_value for v in field.validators if type(v) is kind]
    if len(limits) > 1 or any(callable(limit) for limit in limits):
        raise _Unknown(field.field_name)
    return limits[0] if limits else None


def _text_check(field: StrictStr) -> Callable[[Any], Any]:
    _only_validators(
        field, MaxLengthValidator, SentMaxLengthValidator, ProhibitNullCharactersValidator,
        ProhibitSurrogateCharactersValidator,
    )  # fmt: skip
    if field.trim_whitespace or field.min_length is not None:
        raise _Unknown(field.field_name)
    allow_blank = field.allow_blank
    blank_refused = NOT_BLANK in field.validators
    longest = _bound(field, MaxLengthValidator)
    longest_sent = _bound(field, SentMaxLengthValidator)
    if longest is not None and longest_sent is not None:
        raise _Unknown(field.field_name)

    def check(value: Any) -> Any:
        if type(value) is not str:
            raise _Refused
        if value == "":
            if not allow_blank:
                raise _Refused
            return value  # DRF returns a blank text before running validators
        if longest is not None and len(value) > longest:
            raise _Refused
        if (
            longest_sent is not None
            and len(value) > longest_sent
            and storable.sent_length(value) > longest_sent
        ):
            raise _Refused
        if blank_refused and blank(value):
            raise _Refused
        if _REFUSED_CHARACTERS.search(value) is not None:
            raise _Refused
        return value

    return check


def _key_check(field: OperationKey) -> Callable[[Any], Any]:
    """An operation key: its NFC form (refused if it holds an invisible character), then
    checked as text, as `OperationKey` takes it."""
    text_check = _text_check(field)

    def check(value: Any) -> Any:
        if type(value) is not str:
            raise _Refused
        try:
            return text_check(keys.operation_key(value))
        except keys.InvalidOperationKey:
            raise _Refused from None

    return check


def _int_check(field: StrictInt) -> Callable[[Any], Any]:
    _only_validators(field, MinValueValidator, MaxValueValidator)
    low, high = _bound(field, MinValueValidator), _bound(field, MaxValueValidator)

    def check(value: Any) -> Any:
        if type(value) is not int:  # not a bool, not a float: StrictInt refuses both
            raise _Refused
        if (low is not None and value < low) or (high is not None and value > high):
            raise _Refused
        return value

    return check


def _choice_check(field: serializers.ChoiceField) -> Callable[[Any], Any]:
    _only_validators(field)
    if field.allow_blank:
        raise _Unknown(field.field_name)
    choices = dict(field.choice_strings_to_values)
    if any(type(key) is not str or type(value) is not str for key, value in choices.items()):
        raise _Unknown(field.field_name)

    def check(value: Any) -> Any:
        if type(value) is not str or value not in choices:
            raise _Refused
        return choices[value]

    return check


def _object_check(value: Any) -> Any:
    if type(value) is not dict:
        raise _Refused
    return value


def _any_check(value: Any) -> Any:
    return value


def _list_check(field: serializers.ListSerializer) -> Callable[[Any], Any]:
    if field.validators or field.max_length is not None or field.min_length is not None:
        raise _Unknown(field.field_name)
    allow_empty = field.allow_empty
    child = plan(field.child)

    def check(value: Any) -> Any:
        if type(value) is not list or (not value and not allow_empty):
            raise _Refused
        return [child(item) for item in value]

    return check
