"""Strict serializer fields: a JSON envelope with the wrong type is a 400, never coerced."""

from __future__ import annotations

from rest_framework import serializers

INT_MAX = 2_147_483_647  # PositiveIntegerField, the column most counts end up in
BIGINT_MAX = 9_223_372_036_854_775_807


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


class StrictStr(serializers.CharField):
    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBool(serializers.BooleanField):
    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class JSONObject(serializers.JSONField):
    default_error_messages = {"invalid": "Must be a JSON object."}

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            self.fail("invalid")
        return super().to_internal_value(data)


class Money(serializers.DecimalField):
    """Money accepts a JSON number or a decimal string."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_digits", 14)
        kwargs.setdefault("decimal_places", 6)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float, str)):
            self.fail("invalid")
        return super().to_internal_value(data)
