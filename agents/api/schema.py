"""Teaches drf-spectacular the bearer token scheme and the strict request envelopes."""

from __future__ import annotations

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.plumbing import force_instance


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "agents.api.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent token (`create_agent`) or an operator token "
            "(`create_operator`). Agent tokens reach only their own agent's tasks and "
            "namespace; operator tokens can do what their user's permissions allow.",
        }


class StrictSerializerScheme(OpenApiSerializerExtension):
    """A Strict serializer refuses unknown fields: `additionalProperties: false`."""

    target_class = "agents.api.serializers.Strict"
    match_subclasses = True

    def map_serializer(self, auto_schema, direction):
        serializer = force_instance(self.target)
        schema = auto_schema._map_basic_serializer(serializer, direction)
        schema["additionalProperties"] = False
        one_of_these = getattr(serializer, "at_least_one_of", ())
        if one_of_these:
            schema["anyOf"] = [{"required": [name]} for name in one_of_these]
        return schema


class ConstFieldScheme(OpenApiSerializerFieldExtension):
    """A decision or a row type that names its variant of a `oneOf`."""

    target_class = "agents.api.responses.Const"

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "string", "enum": [self.target.value]}
