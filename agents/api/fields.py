"""Strict serializer fields: a JSON envelope with the wrong type is a 400, never coerced.

Each field's OpenAPI schema says exactly what it accepts, no more and no less: whatever the
schema allows the server takes, and whatever it refuses the server answers with a 400.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from django.core.validators import MaxLengthValidator, RegexValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.db import storable
from agents.guard import keys
from agents.text import NOT_SPACE

INT_MAX = 2_147_483_647  # PositiveIntegerField, the column most counts end up in
BIGINT_MAX = 9_223_372_036_854_775_807
# The largest integer a JSON number keeps exactly in JavaScript (and in most JSON parsers):
# BIGINT columns are bounded by this in the API, so no client ever rounds an id or a count.
JSON_INT_MAX = 2**53 - 1

MONEY_PATTERN = r"^[0-9]{1,8}(\.[0-9]{1,6})?$"
MONEY_WHOLE_MAX = 99_999_999
_MONEY = re.compile(MONEY_PATTERN)
# A required text must hold something besides white space (`agents.text`, the one rule).
NOT_BLANK = RegexValidator(NOT_SPACE, "Must not be blank.")


class StrictInt(serializers.IntegerField):
    """An int that is not a bool and, unless told otherwise, fits a PositiveIntegerField:
    a number too large for its column is a bad envelope (400), not a database error (500)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_value", INT_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class SentMaxLengthValidator(MaxLengthValidator):
    """`max_length` counted on the text as sent: a report's text the database cannot hold
    arrives here already encoded (`agents.db.storable`), several characters for each one sent."""

    def clean(self, x):
        return storable.sent_length(x)


class StrictStr(serializers.CharField):
    """Text taken as sent: never trimmed, so its length is the length the schema states.

    A required text (no `allow_blank`) must hold a non-space character. `reported=True` for
    the text of a report (a tool result, a usage report), which is stored encoded rather than
    refused: its `max_length` counts the characters sent, not the encoding's.
    """

    def __init__(self, *, reported: bool = False, **kwargs):
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        if reported:
            self.validators = [
                SentMaxLengthValidator(v.limit_value, message=v.message)
                if type(v) is MaxLengthValidator
                else v
                for v in self.validators
            ]
        patterned = any(isinstance(v, RegexValidator) for v in self.validators)
        if not self.allow_blank and not patterned:  # a pattern of its own says more
            self.validators.append(NOT_BLANK)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class OperationKey(StrictStr):
    """A write's operation key, taken as the ledger compares it (`agents.guard.keys`): in
    Unicode NFC, its bounds those of that form. A key holding a control, zero-width or
    bidirectional-format character is refused: 400 OPERATION_KEY_INVALID."""

    def to_internal_value(self, data):
        text = super().to_internal_value(data)
        try:
            return keys.operation_key(text)
        except keys.InvalidOperationKey as exc:
            raise serializers.ValidationError(str(exc), code="OPERATION_KEY_INVALID") from None


class ParsedJSON(serializers.JSONField):
    """A value of a body the API's one parser (`agents.api.parsers`) decoded from JSON: taken
    as it is. DRF's JSONField encodes the value again to prove it is JSON, which for a tool's
    result costs as much as the body is long and cannot fail on what `json.loads` returned."""

    def to_internal_value(self, data):
        return data


@extend_schema_field({"type": "object", "additionalProperties": True})
class JSONObject(ParsedJSON):
    default_error_messages = {"invalid": "Must be a JSON object."}

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            self.fail("invalid")
        return data


@extend_schema_field(OpenApiTypes.ANY)
class AnyJSON(ParsedJSON):
    """Any JSON value (the tool's own data, evidence judged by the guard)."""


MONEY_SCHEMA = {
    "oneOf": [
        {"type": "string", "pattern": MONEY_PATTERN, "example": "12.50"},
        {"type": "integer", "minimum": 0, "maximum": MONEY_WHOLE_MAX},
    ],
    "description": "Money: a decimal string with at most 8 digits before the point and 6 "
    'after (`"12.50"`), or a whole number. Fractions as JSON numbers are refused: '
    "binary floats cannot hold cents exactly.",
}


@extend_schema_field(MONEY_SCHEMA)
class Money(serializers.Field):
    """A non-negative amount: a decimal string (`"12.50"`) or a whole JSON number."""

    default_error_messages = {
        "invalid": 'Must be a decimal string such as "12.50" (at most 8 digits before the '
        "point and 6 after) or a whole number.",
    }

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, int):
            if not 0 <= data <= MONEY_WHOLE_MAX:
                self.fail("invalid")
            return Decimal(data)
        # `search`, like the schema's validators: `$` also matches before a final newline,
        # which Decimal ignores.
        if not isinstance(data, str) or not _MONEY.search(data):
            self.fail("invalid")
        try:
            return Decimal(data)
        except InvalidOperation:  # the pattern admits none, but never a 500
            self.fail("invalid")

    def to_representation(self, value):
        return str(value)
