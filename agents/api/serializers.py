"""Input serializers of the runner and operator API (they only validate the envelope).

Their OpenAPI schemas are the request schemas: every bound here is stated there, so a request
the schema allows is well formed and one it forbids answers 400.
"""

from __future__ import annotations

import threading
from decimal import Decimal

from django.core.validators import validate_slug
from django.utils.functional import cached_property
from rest_framework import serializers

from agents.api.fields import (
    BIGINT_MAX,
    JSON_INT_MAX,
    AnyJSON,
    JSONObject,
    Money,
    OperationKey,
    StrictInt,
    StrictStr,
)
from agents.errors import BadInput
from agents.guard import registry, terms
from agents.models import Agent, LimitProfile
from agents.services import configuration

_SHARED = threading.local()


class Strict(serializers.Serializer):
    """Unknown fields are an error too: a typo must not silently do nothing.

    The schema says so with `additionalProperties: false` (see agents/api/schema.py).
    """

    # (Not in the docstring: docstrings are the schema's descriptions.) `shared_fields`: the
    # decision bodies' serializers (never nested, never partial) build and bind their fields
    # once per thread, to an instance that holds no data, and reuse them, instead of DRF
    # deep-copying every declared field for every request. Validating keeps no state on a
    # field, so the answers are the same.
    shared_fields = False
    _template = False
    # A report of what already happened (a usage report, a tool's result): its text is stored
    # encoded, never refused, so the schema allows any text there; elsewhere it says that NUL
    # and lone surrogates are refused (agents/api/schema.py).
    records_reports = False

    @cached_property
    def fields(self):
        cls = type(self)
        if not cls.shared_fields or self._template:
            return super().fields
        fields = _SHARED.__dict__.get(cls)
        if fields is None:
            template = cls()
            template._template = True
            fields = _SHARED.__dict__[cls] = template.fields
        return fields

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["Expected a JSON object."]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class StrictNumber(serializers.FloatField):
    """A JSON number (not a string, not a bool)."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


def _limit_field(name: str) -> serializers.Field:
    spec = registry.BY_NAME[name]
    help_text = spec.help_text
    if spec.kind in registry.WHOLE:
        kwargs = {"max_value": JSON_INT_MAX} if spec.kind == registry.TOKENS else {}
        return StrictInt(required=False, min_value=spec.minimum, help_text=help_text, **kwargs)
    if spec.kind == registry.MONEY:
        return Money(required=False, help_text=help_text)
    if spec.kind == registry.CHOICE:
        return serializers.ChoiceField(list(spec.choices), required=False, help_text=help_text)
    return StrictNumber(
        required=False, allow_null=True, min_value=0, max_value=1, help_text=help_text
    )


class LimitsIn(Strict):
    """Limits of a task. Every field is optional; unknown fields are refused.

    At task creation an agent may only tighten its profile's limits (lower numbers, except
    `max_cycle_period` where higher is stricter); a looser value answers 403
    LIMITS_NOT_ALLOWED.
    """

    def get_fields(self):
        return {name: _limit_field(name) for name in terms.Limits.names()}

    def validate(self, attrs):
        # Money as the guard stores limits: decimal text (JSON has no decimal type).
        return {k: str(v) if isinstance(v, Decimal) else v for k, v in attrs.items()}


class TaskCreateIn(Strict):
    goal = StrictStr(max_length=10_000, help_text="The user goal, shown to operators.")
    profile = StrictStr(
        required=False, allow_blank=True, max_length=64,
        help_text="A limit profile by name; empty or absent: the agent's default profile.",
    )  # fmt: skip
    limits = LimitsIn(required=False, help_text="Limits to tighten for this task only.")
    external_ref = StrictStr(required=False, allow_blank=True, max_length=200)
    trigger_key = StrictStr(
        required=False, allow_blank=True, max_length=200,
        help_text="What triggered the task (a webhook id, a ticket): at most "
        "`max_tasks_per_trigger` tasks per key per window, then 429 TRIGGER_LOOP.",
    )  # fmt: skip


def request_id_field(*, reported: bool = False) -> StrictStr:
    """A decision body's `request_id` (blank or absent: none)."""
    return StrictStr(
        required=False, allow_blank=True, max_length=200, reported=reported,
        help_text="The client's id for this request, unique within the task: a repeat with "
        "the same id (a request whose answer was lost, sent again) is answered the first "
        "answer and counts nothing; the same id with another body, or on another endpoint, "
        "answers 409 REQUEST_ID_REUSED.",
    )  # fmt: skip


class ModelCallIn(Strict):
    shared_fields = True

    model = StrictStr(
        required=False, allow_blank=True, max_length=100, default="",
        help_text="Model name, looked up in the price table.",
    )  # fmt: skip
    est_prompt_tokens = StrictInt(required=False, min_value=0, default=0)
    max_output_tokens = StrictInt(required=False, min_value=0, default=0)
    request_id = request_id_field()


class ToolCallSpec(Strict):
    """A tool call a model asked for, in a usage report (a report: see `StrictStr`)."""

    records_reports = True

    name = StrictStr(max_length=200, reported=True)
    args = JSONObject(required=False, default=dict)


class UsageIn(Strict):
    records_reports = True
    shared_fields = True

    prompt_tokens = StrictInt(min_value=0)
    completion_tokens = StrictInt(min_value=0)
    tool_calls = ToolCallSpec(
        many=True, required=False,
        help_text="The tool calls the model asked for: three identical non-empty lists in a "
        "row stop the task with repeated_output.",
    )  # fmt: skip
    output_text = StrictStr(required=False, allow_blank=True)
    request_id = request_id_field(reported=True)


class ToolRequestIn(Strict):
    shared_fields = True

    tool = StrictStr(max_length=200)
    args = JSONObject(help_text="The tool's arguments; their canonical JSON is fingerprinted.")
    effect = serializers.ChoiceField(
        choices=[terms.READ, terms.WRITE],
        help_text="`write` calls need an operation_key and go through the ledger.",
    )
    operation_key = OperationKey(
        required=False, allow_blank=True, max_length=300,
        help_text="The business action of a write, unique in the agent's namespace. Compared "
        "after Unicode NFC (its length too); a key holding a control, zero-width or "
        "bidirectional-format character is refused: 400 OPERATION_KEY_INVALID.",
    )  # fmt: skip
    job_id = StrictStr(
        required=False, allow_blank=True, max_length=200,
        help_text="Set for a status poll of a PENDING job: counted against max_polls.",
    )  # fmt: skip
    call_id = StrictStr(required=False, allow_blank=True, max_length=200)
    model_call = StrictInt(required=False, min_value=1, max_value=JSON_INT_MAX)
    request_id = request_id_field()


class ToolResultIn(Strict):
    records_reports = True
    shared_fields = True

    # `kind` is any string, blank or long included: an unknown kind is not a 400, the tool ran
    # and its call must close (the call keeps the kind's first 32 characters).
    kind = StrictStr(
        allow_blank=True,
        help_text="SUCCESS, RETRYABLE, PENDING, PRECONDITION, FATAL or NO_RESULT. Any other "
        "value is accepted and stops the task with bad_result: the tool ran, its call closes.",
    )
    code = StrictStr(required=False, allow_blank=True, max_length=100, reported=True)
    data = AnyJSON(required=False, allow_null=True, help_text="The tool's result, any JSON.")
    data_hash = StrictStr(required=False, allow_blank=True, max_length=128, reported=True)
    # Any wait is judged by the guard (past the deadline: PARTIAL/deadline), never a 400;
    # only a number no 64-bit integer holds is a bad envelope.
    wait_ms = StrictInt(
        required=False, min_value=-BIGINT_MAX, max_value=BIGINT_MAX,
        help_text="How long to wait before the next attempt or poll (RETRYABLE, PENDING); a "
        "wait that reaches the deadline stops the task with deadline.",
    )  # fmt: skip
    job_id = StrictStr(required=False, allow_blank=True, max_length=200, reported=True)
    attempts = StrictInt(required=False, min_value=1, max_value=10_000, default=1)
    duration_ms = StrictInt(required=False, min_value=0)
    error = StrictStr(required=False, allow_blank=True)
    # Evidence is validated by the guard (invalid evidence stops the task, it is not a 400).
    evidence = AnyJSON(
        required=False, allow_null=True,
        help_text='`{"revision": int, "done": bool, "committed"?: bool, "milestone"?: str}`. '
        "Anything else is accepted and judged by the guard: invalid_evidence stops the task.",
    )  # fmt: skip
    request_id = request_id_field(reported=True)


class FinishIn(Strict):
    evidence = AnyJSON(
        required=False, allow_null=True,
        help_text="`evidence.done == true` with a valid revision: COMPLETED; otherwise "
        "PARTIAL/goal_unverified.",
    )  # fmt: skip
    answer = StrictStr(required=False, allow_blank=True)
    request_id = request_id_field()


class StopIn(Strict):
    reason = StrictStr(
        required=False, allow_blank=True, max_length=2000, default="",
        help_text="Why (audit log). An agent may leave it out; an operator token must give "
        "one (400 REASON_REQUIRED).",
    )  # fmt: skip
    request_id = StrictStr(
        required=False, allow_blank=True, max_length=200, default="",
        help_text="Repeating a stop with the same request_id answers the same.",
    )  # fmt: skip


class GrantIn(Strict):
    """What a resume adds to the task's limits (each raises the matching limit)."""

    model_calls = StrictInt(required=False, min_value=0)
    tool_requests = StrictInt(required=False, min_value=0)
    tool_executions = StrictInt(required=False, min_value=0)
    retries = StrictInt(required=False, min_value=0)
    polls = StrictInt(required=False, min_value=0)
    tokens = StrictInt(required=False, min_value=0)
    cost = Money(required=False)
    seconds = StrictInt(required=False, min_value=0, help_text="Moves the deadline.")


class ResumeIn(Strict):
    reason = StrictStr(max_length=2000, help_text="Why resuming is safe now (audit log).")
    grant = GrantIn(required=False)


class ReconcileIn(Strict):
    verdict = serializers.ChoiceField(
        choices=[terms.OP_COMMITTED, terms.NOT_COMMITTED, terms.UNKNOWN],
        help_text="COMMITTED: later requests answer REUSE with `result`; NOT_COMMITTED: the "
        "write may execute again under its key; UNKNOWN: still unresolved.",
    )
    note = StrictStr(max_length=5000, help_text="What the operator checked (audit log).")
    result = AnyJSON(
        required=False, allow_null=True,
        help_text="The committed write's result (COMMITTED only; else 400 RESULT_NOT_ALLOWED).",
    )  # fmt: skip
    only_with = {"result": ("verdict", [terms.OP_COMMITTED])}  # the schema's; the service refuses
    evidence = AnyJSON(required=False, allow_null=True)


class PauseIn(Strict):
    # Kept on the agent row (its paused_reason column): no longer than that column.
    reason = StrictStr(max_length=Agent._meta.get_field("paused_reason").max_length)


class LimitsPatchIn(LimitsIn):
    """PATCH tasks/{id}/limits: any limit field (at least one); `reason` for the audit log."""

    at_least_one_of = tuple(terms.Limits.names())  # the schema's anyOf; the service refuses none

    def get_fields(self):
        fields = super().get_fields()
        fields["reason"] = StrictStr(required=False, allow_blank=True, max_length=2000)
        return fields


class ProfileIn(Strict):
    """A limit profile's fields; on PATCH every field is optional."""

    # The fields state the profile's bounds for the schema; the rules themselves are checked
    # by the one profile validator, the configuration service's (the console's form reaches it
    # too), so a mistake gets the same sentence through either door. The fields then only turn
    # the JSON into values (and refuse a fraction of money as a JSON number).
    def to_internal_value(self, data):
        if isinstance(data, dict) and not set(data) - set(self.fields):
            try:
                configuration.validate_profile(data, creating=not self.partial)
            except BadInput as exc:
                raise serializers.ValidationError(exc.fields) from None
        return super().to_internal_value(data)

    def get_fields(self):
        fields = {
            "name": StrictStr(
                max_length=LimitProfile._meta.get_field("name").max_length,
                validators=[validate_slug],
                help_text="Letters, digits, hyphens and underscores.",
            ),  # fmt: skip
            "description": StrictStr(
                required=False,
                allow_blank=True,
                max_length=LimitProfile._meta.get_field("description").max_length,
            ),
        }
        fields.update({spec.name: _limit_field(spec.name) for spec in registry.LIMITS})
        return fields


class AgentPatchIn(Strict):
    """PATCH agents/{name} (admin): the profiles the agent may use besides its default."""

    allowed_profiles = serializers.ListField(
        child=StrictStr(max_length=64), max_length=500, required=False,
        help_text="Replaces the granted profiles; absent: they stay as they are.",
    )  # fmt: skip
    reason = StrictStr(required=False, allow_blank=True, max_length=2000, default="")
