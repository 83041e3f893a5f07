"""Teaches drf-spectacular the bearer token scheme and the strict request envelopes."""

from __future__ import annotations

import threading

from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.plumbing import force_instance
from drf_spectacular.views import SpectacularAPIView
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer

from agents.api.fields import NOT_BLANK, AnyJSON, JSONObject, StrictStr
from agents.db.storable import NUL
from agents.guard import keys
from agents.text import SPACE_CHARS

# Text the database can hold (agents.db.storable): what a body that is not a report may carry,
# keys of its objects included; a required text also holds a non-space character. The
# patterns name NUL only: a lone surrogate cannot be sent as UTF-8 at all (only as a JSON
# escape), and a pattern holding the surrogate range is one schemathesis cannot generate
# from, so it drops it; the descriptions say both.
STORABLE_TEXT = rf"^[^{NUL}]*$"
STORABLE_NOT_BLANK = rf"^[^{NUL}]*[^{NUL}{SPACE_CHARS}][^{NUL}]*$"
STORABLE_JSON = "StorableJSON"
_STORABLE_JSON_REF = {"$ref": f"#/components/schemas/{STORABLE_JSON}"}
# Keywords of one type each, so the one schema holds for any JSON value, at any depth. Object
# keys are refused alike, which OpenAPI 3.0 cannot state (it has no `propertyNames`): the
# description says it, and the conformance run keeps NUL out of generated keys.
UNSTORABLE_KEYS = "Object keys holding NUL or a lone surrogate are refused alike (400)."
STORABLE_JSON_SCHEMA = {
    "description": "Any JSON value whose text holds no NUL and no lone surrogate: the database "
    f"cannot hold them (400 UNSUPPORTED_TEXT). {UNSTORABLE_KEYS}",
    "pattern": STORABLE_TEXT,
    "additionalProperties": _STORABLE_JSON_REF,
    "items": _STORABLE_JSON_REF,
}


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
        if not serializer.records_reports:
            for name, field in serializer.fields.items():
                if name in schema.get("properties", {}):
                    _storable(field, schema["properties"][name])
        for name, (on, values) in getattr(serializer, "only_with", {}).items():
            # `name` other than null only when `on` is one of `values` (the service's rule).
            schema.setdefault("allOf", []).append({"anyOf": [
                {"properties": {on: {"enum": list(values)}}},
                {"properties": {name: {"nullable": True, "not": {}}}},  # absent, or null
            ]})  # fmt: skip
        return schema


def _storable(field: serializers.Field, prop: dict) -> None:
    """Say in a field's schema `prop` that its text must be storable, as the API's parser
    refuses it otherwise (a body that is not a report: see `Strict.records_reports`)."""
    if isinstance(field, serializers.ListField) and "items" in prop:
        _storable(field.child, prop["items"])
    elif isinstance(field, JSONObject):
        prop["additionalProperties"] = _STORABLE_JSON_REF
        prop["description"] = f"{prop.get('description', '')} {UNSTORABLE_KEYS}".lstrip()
    elif isinstance(field, AnyJSON):
        prop["allOf"] = [_STORABLE_JSON_REF]
    elif isinstance(field, StrictStr) and "enum" not in prop:
        if NOT_BLANK in field.validators:
            prop["pattern"] = STORABLE_NOT_BLANK
        elif "pattern" not in prop:  # a pattern of its own (a slug) admits no such text
            prop["pattern"] = STORABLE_TEXT


class ConstFieldScheme(OpenApiSerializerFieldExtension):
    """A decision or a row type that names its variant of a `oneOf`."""

    target_class = "agents.api.responses.Const"

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "string", "enum": [self.target.value]}


class OperationKeyScheme(OpenApiSerializerFieldExtension):
    """An operation key's schema says which characters it may not hold: `not` a pattern that
    finds one."""

    target_class = "agents.api.fields.OperationKey"

    def map_serializer_field(self, auto_schema, direction):
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        return {**schema, "not": {"pattern": keys.REFUSED_PATTERN}}


API_REFERENCE = """\
Loopwarden guards an AI agent's loop: the agent asks before every paid model call and every
tool execution, and reports what happened. The guard answers with a decision.

**Decisions.** `ALLOW` make the model call, then report its usage. `EXECUTE` run the tool,
then always report its result (an exception is `NO_RESULT`). `REUSE` this write already
committed: hand the stored `result` to the model, do not run it. `BLOCK` a repeated call:
hand the `observation` to the model as the tool message. `WAIT` another call holds this
write's operation key: ask again after `retry_after_ms`. `CONTINUE` recorded, go on (after
`wait_ms` when given). `STOP` the task is over: end the run and pass the `report` upstream;
every later call answers the same report.

**Tokens.** `Authorization: Bearer <token>`. An agent token (`manage.py create_agent`) reaches
only its own tasks and namespace (another agent's task answers 404). An operator token
(`manage.py create_operator`) can do what its user's permissions allow.

**Errors** answer `{"error": {"code", "message", "fields"}}` and change nothing: 400 bad
envelope, 401 no or unknown token, 403 not allowed, 404 not found, 409 refused in the current
state, 413 body too large, 429 too many calls (`THROTTLED`, with `Retry-After`) or tasks from one
trigger (`TRIGGER_LOOP`, a verdict on a looping workflow).

**Lists** (`tasks`, `operations`, a task's `trace`, `audit`) come a page at a time: follow
`next` until it is null. Nothing is ever cut.

**Text** the database cannot hold (NUL, lone surrogates) is refused in input with a 400; a
tool's reported result is never refused for it (a committed write must reach the ledger) and
is stored encoded.
"""


def describe_the_api(result, generator, request, public):
    """Postprocessing hook: the schema's own description is the API reference, and a body
    that must name something (required fields, or one of several) must be sent at all."""
    result["info"]["description"] = API_REFERENCE
    components = result.get("components", {}).get("schemas", {})
    components[STORABLE_JSON] = STORABLE_JSON_SCHEMA
    for methods in result["paths"].values():
        for operation in methods.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            if not body:
                continue
            ref = body["content"]["application/json"]["schema"].get("$ref", "")
            component = components.get(ref.rsplit("/", 1)[-1], {})
            if component.get("required") or component.get("anyOf"):
                body["required"] = True
    return result


class SchemaView(SpectacularAPIView):
    """The OpenAPI schema, generated one request at a time.

    drf-spectacular loads its extensions' target classes on the first schema request, and not
    safely across threads: two first requests side by side (gunicorn's threaded workers serve
    them so) could answer 500 (an AttributeError in its lazy loading). Generating the schema
    is rare; serializing it costs nothing that matters.
    """

    _generating = threading.Lock()

    def finalize_response(self, request, response, *args, **kwargs):
        # A refusal (405, 401...) is the JSON error envelope, not the envelope in OpenAPI YAML.
        if response.status_code >= 400:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)

    def dispatch(self, request, *args, **kwargs):  # not `get`: that one carries its own schema
        with self._generating:
            return super().dispatch(request, *args, **kwargs)
