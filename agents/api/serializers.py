"""Input serializers of the runner and operator API (they only validate the envelope)."""

from __future__ import annotations

from rest_framework import serializers

from agents.api.fields import BIGINT_MAX, JSONObject, Money, StrictInt, StrictStr
from agents.guard import types as g


class Strict(serializers.Serializer):
    """Unknown fields are an error too: a typo must not silently do nothing."""

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["Expected a JSON object."]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class TaskCreateIn(Strict):
    goal = StrictStr(max_length=10_000)
    profile = StrictStr(required=False, allow_blank=True, max_length=64)
    limits = JSONObject(required=False)
    external_ref = StrictStr(required=False, allow_blank=True, max_length=200)
    trigger_key = StrictStr(required=False, allow_blank=True, max_length=200)


class ModelCallIn(Strict):
    model = StrictStr(required=False, allow_blank=True, max_length=100, default="")
    est_prompt_tokens = StrictInt(required=False, min_value=0, default=0)
    max_output_tokens = StrictInt(required=False, min_value=0, default=0)


class ToolCallSpec(Strict):
    name = StrictStr(max_length=200)
    args = JSONObject(required=False, default=dict)


class UsageIn(Strict):
    prompt_tokens = StrictInt(min_value=0)
    completion_tokens = StrictInt(min_value=0)
    tool_calls = ToolCallSpec(many=True, required=False)
    output_text = StrictStr(required=False, allow_blank=True, trim_whitespace=False)


class ToolRequestIn(Strict):
    tool = StrictStr(max_length=200)
    args = JSONObject()
    effect = serializers.ChoiceField(choices=[g.READ, g.WRITE])
    operation_key = StrictStr(required=False, allow_blank=True, max_length=300)
    job_id = StrictStr(required=False, allow_blank=True, max_length=200)
    call_id = StrictStr(required=False, allow_blank=True, max_length=200)
    model_call = StrictInt(required=False, min_value=1, max_value=BIGINT_MAX)


class ToolResultIn(Strict):
    # `kind` is any string: an unknown kind is not a 400, the tool ran and its call must close.
    kind = StrictStr(max_length=32)
    code = StrictStr(required=False, allow_blank=True, max_length=100)
    data = serializers.JSONField(required=False, allow_null=True)
    data_hash = StrictStr(required=False, allow_blank=True, max_length=128)
    # Any wait is judged by the guard (past the deadline: PARTIAL/deadline), never a 400.
    wait_ms = StrictInt(required=False, min_value=-BIGINT_MAX, max_value=BIGINT_MAX)
    job_id = StrictStr(required=False, allow_blank=True, max_length=200)
    attempts = StrictInt(required=False, min_value=1, max_value=10_000, default=1)
    duration_ms = StrictInt(required=False, min_value=0)
    error = StrictStr(required=False, allow_blank=True, trim_whitespace=False)
    # Evidence is validated by the guard (invalid evidence stops the task, it is not a 400).
    evidence = serializers.JSONField(required=False, allow_null=True)


class FinishIn(Strict):
    evidence = serializers.JSONField(required=False, allow_null=True)
    answer = StrictStr(required=False, allow_blank=True, trim_whitespace=False)


class StopIn(Strict):
    reason = StrictStr(required=False, allow_blank=True, max_length=2000, default="")
    request_id = StrictStr(required=False, allow_blank=True, max_length=200, default="")


class GrantIn(Strict):
    model_calls = StrictInt(required=False, min_value=0)
    tool_requests = StrictInt(required=False, min_value=0)
    tool_executions = StrictInt(required=False, min_value=0)
    retries = StrictInt(required=False, min_value=0)
    polls = StrictInt(required=False, min_value=0)
    tokens = StrictInt(required=False, min_value=0)
    cost = Money(required=False, min_value=0)
    seconds = StrictInt(required=False, min_value=0)


class ResumeIn(Strict):
    reason = StrictStr(max_length=2000)
    grant = GrantIn(required=False)


class ReconcileIn(Strict):
    verdict = serializers.ChoiceField(choices=[g.OP_COMMITTED, g.NOT_COMMITTED, g.UNKNOWN])
    note = StrictStr(max_length=5000)
    result = serializers.JSONField(required=False, allow_null=True)
    evidence = serializers.JSONField(required=False, allow_null=True)


class PauseIn(Strict):
    reason = StrictStr(max_length=2000)


class LimitsPatchIn(Strict):
    """PATCH tasks/{id}/limits: any limit field; `reason` for the audit log."""

    reason = StrictStr(required=False, allow_blank=True, max_length=2000, default="")

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ["Expected a JSON object."]})
        names = set(g.Limits.names())
        unknown = sorted(set(data) - names - {"reason"})
        if unknown:
            raise serializers.ValidationError({name: ["Unknown limit."] for name in unknown})
        reason = data.get("reason", "")
        if not isinstance(reason, str):
            raise serializers.ValidationError({"reason": ["Must be a string."]})
        return {"reason": reason, "limits": {k: v for k, v in data.items() if k in names}}


class AgentPatchIn(Strict):
    """PATCH agents/{name} (admin): the profiles the agent may use besides its default."""

    allowed_profiles = serializers.ListField(child=StrictStr(max_length=64), max_length=500)
    reason = StrictStr(required=False, allow_blank=True, max_length=2000, default="")
