"""Output schemas of the API: what every answer and every error looks like.

These serializers only describe the JSON that agents/selectors.py builds; the views do not
render through them. The schemathesis run (tests/schemathesis) holds the two together: every
answer of the live server must match its schema.

The descriptions are the API reference: what each decision means and what to do about it.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer
from rest_framework import serializers as s

from agents.guard import registry, terms

NULLABLE = {"allow_null": True}


def _choice(values, **kwargs) -> s.ChoiceField:
    return s.ChoiceField(choices=list(values), **kwargs)


TERMINAL_STATES = tuple(state for state in terms.TASK_STATES if state in terms.TERMINAL_STATES)


class Const(s.CharField):
    """A field that always holds one value (a decision, a row type): `enum: [value]`, see
    agents/api/schema.py."""

    def __init__(self, value: str, **kwargs):
        self.value = value
        super().__init__(**kwargs)


def _one(value: str, help_text: str) -> Const:
    return Const(value, help_text=help_text)


class AnyValue(s.JSONField):
    """Any JSON value."""


# -- errors ----------------------------------------------------------------------------------


class ErrorDetail(s.Serializer):
    code = s.CharField(help_text="Stable, machine-readable: INVALID_FIELDS, TASK_NOT_FOUND, ...")
    message = s.CharField(help_text="One sentence for a human.")
    fields = s.DictField(
        child=AnyValue(),
        help_text="Field path -> what is wrong with it, usually a sentence; a list for some "
        "codes (OPERATIONS_UNRESOLVED lists the operation keys); DEADLINE_PASSED adds "
        "`seconds_needed`, the least grant.seconds that puts the deadline ahead of now, as a "
        "number. May be empty.",
    )


class ErrorBody(s.Serializer):
    """Every error answers this envelope, whatever the status."""

    error = ErrorDetail()


ERROR_TEXT = {
    400: "Bad envelope (not JSON, wrong types, missing or unknown fields, a bad query "
    "parameter or cursor): nothing changed.",
    401: "No token, or an unknown or revoked one (UNAUTHENTICATED).",
    403: "The token may not do this (FORBIDDEN, AGENT_TOKEN_REQUIRED, PROFILE_NOT_ALLOWED).",
    404: "No such object, or one this token may not see (another agent's task answers 404).",
    405: "Method not allowed on this path.",
    408: "The body did not arrive in full in time (BODY_TIMEOUT): nothing was done; send it again.",
    409: "Refused in the object's current state (AGENT_PAUSED, OPERATIONS_UNRESOLVED, "
    "DEADLINE_PASSED, RESULT_ALREADY_REPORTED, REQUEST_ID_REUSED, ...): nothing changed.",
    413: "The body is larger than the server accepts (BODY_TOO_LARGE, see "
    "LOOPWARDEN_MAX_BODY_BYTES).",
    415: "The body is not application/json.",
    429: "Too many requests: THROTTLED (too many calls with one token; retry after "
    "`Retry-After` seconds) or TRIGGER_LOOP (one trigger keeps restarting the task; a verdict, "
    "not to be retried).",
}


def errors(*statuses: int, body: bool) -> dict[int, OpenApiResponse]:
    """The error answers of an operation: 400/401/403/404/405/429, 408/413/415 for one that
    takes a body, plus `statuses`."""
    codes = {400, 401, 403, 404, 405, 429, *statuses} | ({408, 413, 415} if body else set())
    return {
        code: OpenApiResponse(ErrorBody, description=ERROR_TEXT[code]) for code in sorted(codes)
    }


def answers(ok: dict, *statuses: int, body: bool = False) -> dict:
    """`ok` (status -> schema) and every error the operation may answer."""
    return {**ok, **errors(*statuses, body=body)}


# -- task ------------------------------------------------------------------------------------


def _limit_value(spec: registry.Limit, money_help: str = "A decimal string.") -> s.Field:
    """A limit's value (or a usage or what remains of it) as the answers write it."""
    if spec.kind == registry.MONEY:
        return s.CharField(help_text=money_help)
    if spec.kind == registry.CHOICE:
        return _choice(spec.choices)
    if spec.kind == registry.RATIO:
        return s.FloatField(**NULLABLE)
    return s.IntegerField()


def _serializer(name: str, doc: str, fields: dict[str, s.Field]) -> type[s.Serializer]:
    return type(name, (s.Serializer,), {"__doc__": doc, "__module__": __name__, **fields})


# The report's usage and remaining, by grant (agents.guard.report), and the task's limits.
Usage = _serializer(
    "Usage",
    "What the task consumed over all its phases.",
    {
        spec.grant: _limit_value(spec, "Settled spend, a decimal string.")
        for spec in registry.GRANTS
        if spec.grant and spec.usage != registry.CLOCK
    },
)
Remaining = _serializer(
    "Remaining",
    "What is left under the current limits, never negative.",
    {
        spec.grant: _limit_value(spec, "Also minus outstanding reservations.")
        for spec in registry.GRANTS
        if spec.grant and spec.remaining
    },
)
Limits = _serializer(
    "Limits",
    "The task's own limits, copied from its profile at creation.",
    {spec.name: _limit_value(spec) for spec in registry.TASK_LIMITS},
)


class ReportOperation(s.Serializer):
    key = s.CharField()
    state = _choice(terms.OPERATION_STATES)


class StopReport(s.Serializer):
    """Stored once when the task stops, returned unchanged on every later call."""

    state = _choice(TERMINAL_STATES)
    reason = _choice(terms.REASONS)
    code = s.CharField(
        **NULLABLE,
        help_text="For upstream callers: GUARD_ROUND_LIMIT, GUARD_TIME_LIMIT, GUARD_TOKEN_LIMIT, "
        "GUARD_COST_LIMIT, GUARD_LOOP_DETECTED, GUARD_LEDGER, GUARD_BAD_INPUT, GUARD_TOOL_FAILED, "
        "GUARD_STOPPED; null for goal_met (COMPLETED) and goal_unverified.",
    )
    phase = s.IntegerField()
    at = s.DateTimeField()
    completed = s.ListField(child=s.CharField(), help_text="Milestones of accepted evidence.")
    operations = ReportOperation(many=True, help_text="The task's ledger rows.")
    usage = Usage()
    remaining = Remaining()
    resume_condition = s.CharField(help_text="What must happen before an operator may resume.")


TASK_STATE_TEXT = (
    "RUNNING, or terminal: COMPLETED (goal met with evidence), PARTIAL (a budget, the deadline "
    "or a loop rule stopped it), FAILED (the tool failed or reported nonsense), NEEDS_HUMAN "
    "(a write's outcome is unknown or in conflict: reconcile, then resume), STOPPED (an "
    "operator, the agent or a paused agent stopped it)."
)


class Task(s.Serializer):
    id = s.UUIDField()
    agent = s.CharField()
    goal = s.CharField()
    external_ref = s.CharField(allow_blank=True)
    trigger_key = s.CharField(allow_blank=True)
    profile = s.CharField(**NULLABLE)
    state = _choice(terms.TASK_STATES, help_text=TASK_STATE_TEXT)
    reason = _choice(terms.REASONS, **NULLABLE, help_text="Why it stopped; null while RUNNING.")
    code = s.CharField(**NULLABLE)
    phase = s.IntegerField(help_text="1 at creation; each resume starts the next phase.")
    limits = Limits()
    usage = Usage()
    remaining = Remaining()
    revision = s.IntegerField(help_text="The last verified revision (from evidence).")
    stagnant = s.IntegerField(help_text="Consecutive steps without verified progress.")
    deadline_at = s.DateTimeField()
    created_at = s.DateTimeField()
    updated_at = s.DateTimeField()
    report = StopReport(**NULLABLE, help_text="The stop report once terminal, else null.")


class Page(s.Serializer):
    next = s.URLField(
        **NULLABLE,
        help_text="The next page, with the same filters; null on the last page. Follow it "
        "until null: no list is ever cut.",
    )


class TaskPage(Page):
    tasks = Task(many=True, help_text="Newest first.")


# -- decisions -------------------------------------------------------------------------------

STOP_TEXT = (
    "STOP: the task is over (or was already). Do not run the model or the tool; end the run and "
    "hand `report` upstream. Every later call answers the same stored report."
)


class StopFields(s.Serializer):
    state = _choice(TERMINAL_STATES)
    reason = _choice(terms.REASONS, **NULLABLE)
    report = StopReport(**NULLABLE)


class ModelCallAllow(s.Serializer):
    decision = _one(terms.ALLOW, "ALLOW: make the paid model call now, then report its usage.")
    model_call = s.IntegerField(help_text="Id for POST .../model-calls/{model_call}/usage.")
    round = s.IntegerField(**NULLABLE)


class ModelCallStop(StopFields):
    decision = _one(terms.STOP, STOP_TEXT)
    model_call = s.IntegerField(help_text="The trace row of this refused call.")


MODEL_CALL_DECISION = PolymorphicProxySerializer(
    component_name="ModelCallDecision",
    serializers=[ModelCallAllow, ModelCallStop],
    resource_type_field_name=None,
)


class UsageContinue(s.Serializer):
    decision = _one(terms.CONTINUE, "CONTINUE: usage recorded; go on with the model's answer.")


class UsageStop(StopFields):
    decision = _one(terms.STOP, STOP_TEXT)


USAGE_DECISION = PolymorphicProxySerializer(
    component_name="UsageDecision",
    serializers=[UsageContinue, UsageStop],
    resource_type_field_name=None,
)


class ToolCallBase(s.Serializer):
    tool_call = s.IntegerField(help_text="Id for POST .../tool-calls/{tool_call}/result.")
    fingerprint = s.CharField(**NULLABLE, help_text="sha256 of tool + canonical args.")


class ToolExecute(ToolCallBase):
    decision = _one(
        terms.EXECUTE,
        "EXECUTE: run the tool now, then always report its result, even on an exception "
        "(kind NO_RESULT). For a write the ledger claim is IN_FLIGHT until `lease_expires_at`.",
    )
    lease_expires_at = s.DateTimeField(**NULLABLE)


class ToolReuse(ToolCallBase):
    decision = _one(
        terms.REUSE,
        "REUSE: this write already COMMITTED under its operation key; do not run it again. "
        "Give `result` (the stored result) to the model as the tool's answer.",
    )
    result = AnyValue(**NULLABLE)


class ToolBlock(ToolCallBase):
    decision = _one(
        terms.BLOCK,
        "BLOCK: a repeated call; nothing runs. Give `observation` to the model as the tool "
        "message; the next identical request stops the task with same_call.",
    )
    reason = _choice(terms.REASONS)
    observation = s.DictField(
        help_text='`{"success": false, "code": "DUPLICATE_TOOL_CALL_BLOCKED", "retryable": '
        'false, "message": ...}`'
    )


class ToolWait(ToolCallBase):
    decision = _one(
        terms.WAIT,
        "WAIT: another call holds this write's operation key right now; nothing runs. Ask "
        "again after `retry_after_ms`.",
    )
    retry_after_ms = s.IntegerField()


class ToolStop(ToolCallBase, StopFields):
    decision = _one(terms.STOP, STOP_TEXT)


TOOL_CALL_DECISION = PolymorphicProxySerializer(
    component_name="ToolCallDecision",
    serializers=[ToolExecute, ToolReuse, ToolBlock, ToolWait, ToolStop],
    resource_type_field_name=None,
)


class ResultContinue(s.Serializer):
    decision = _one(
        terms.CONTINUE,
        "CONTINUE: recorded; go on. With `wait_ms` (RETRYABLE or PENDING) wait that long "
        "before the next attempt or poll.",
    )
    revision = s.IntegerField(help_text="The task's verified revision now.")
    wait_ms = s.IntegerField(required=False)


class ResultStop(StopFields):
    decision = _one(terms.STOP, STOP_TEXT + " The result itself was recorded.")


TOOL_RESULT_DECISION = PolymorphicProxySerializer(
    component_name="ToolResultDecision",
    serializers=[ResultContinue, ResultStop],
    resource_type_field_name=None,
)


# -- trace -----------------------------------------------------------------------------------


class ModelCallRow(s.Serializer):
    type = _one("model_call", "A model-call gate and its usage.")
    id = s.IntegerField()
    seq = s.IntegerField(help_text="Orders model and tool calls of the task together.")
    phase = s.IntegerField()
    round = s.IntegerField(**NULLABLE)
    model = s.CharField(allow_blank=True)
    decision = _choice(terms.DECISIONS)
    reason = s.CharField(**NULLABLE)
    reserved_cost = s.CharField()
    prompt_tokens = s.IntegerField(**NULLABLE)
    completion_tokens = s.IntegerField(**NULLABLE)
    cost = s.CharField(**NULLABLE)
    tool_calls = AnyValue(**NULLABLE)
    created_at = s.DateTimeField()
    settled_at = s.DateTimeField(**NULLABLE)


class ToolCallRow(s.Serializer):
    type = _one("tool_call", "A tool request and its result.")
    id = s.IntegerField()
    seq = s.IntegerField()
    phase = s.IntegerField()
    tool = s.CharField()
    args = AnyValue()
    effect = _choice([terms.READ, terms.WRITE])
    operation_key = s.CharField(**NULLABLE)
    job_id = s.CharField(**NULLABLE)
    call_id = s.CharField(**NULLABLE)
    model_call = s.IntegerField(**NULLABLE)
    fingerprint = s.CharField(allow_blank=True)
    decision = _choice(terms.DECISIONS)
    reason = s.CharField(**NULLABLE)
    result_kind = s.CharField(**NULLABLE)
    result_decision = s.CharField(**NULLABLE)
    result_reason = s.CharField(**NULLABLE)
    revision_after = s.IntegerField(**NULLABLE)
    duration_ms = s.IntegerField(**NULLABLE)
    created_at = s.DateTimeField()
    reported_at = s.DateTimeField(**NULLABLE)


TRACE_CALL = PolymorphicProxySerializer(
    component_name="TraceCall",
    serializers=[ModelCallRow, ToolCallRow],
    resource_type_field_name=None,
    many=True,
)


class EventRow(s.Serializer):
    type = _one("event", "An audit event.")
    id = s.IntegerField()
    kind = s.CharField(help_text="task_created, task_stopped, task_resumed, limits_changed, ...")
    phase = s.IntegerField(**NULLABLE)
    actor = s.CharField(help_text='"agent:<name>", "user:<username>" or "system:<job>".')
    reason = s.CharField(allow_blank=True)
    code = s.CharField(**NULLABLE)
    detail = AnyValue()
    created_at = s.DateTimeField()


class TracePage(Page):
    """One page of a task's trace: up to `limit` calls and up to `limit` events."""

    task = s.UUIDField()
    calls = TRACE_CALL
    events = EventRow(many=True, help_text="In order.")


class AuditEvent(EventRow):
    task = s.UUIDField(**NULLABLE)
    agent = s.CharField(**NULLABLE)
    operation = s.IntegerField(**NULLABLE)


class AuditPage(Page):
    events = AuditEvent(many=True, help_text="Newest first.")


# -- ledger, agents, profiles ----------------------------------------------------------------


class Reconciliation(s.Serializer):
    verdict = _choice([terms.OP_COMMITTED, terms.NOT_COMMITTED, terms.UNKNOWN])
    previous_state = _choice(terms.OPERATION_STATES)
    note = s.CharField(allow_blank=True)
    result = AnyValue(**NULLABLE)
    actor = s.CharField()
    automatic = s.BooleanField()
    created_at = s.DateTimeField()


class Operation(s.Serializer):
    """A ledger row: one business action of a write tool, unique per (namespace, key)."""

    id = s.IntegerField()
    namespace = s.CharField()
    key = s.CharField()
    tool = s.CharField()
    args = AnyValue()
    fingerprint = s.CharField()
    state = _choice(
        terms.OPERATION_STATES,
        help_text="IN_FLIGHT (claimed, running), COMMITTED (done: later requests REUSE), "
        "UNKNOWN (nobody knows: reconcile it), NOT_COMMITTED (may execute again).",
    )
    task = s.UUIDField()
    result = AnyValue(**NULLABLE)
    claimed_at = s.DateTimeField()
    lease_expires_at = s.DateTimeField(**NULLABLE)
    committed_at = s.DateTimeField(**NULLABLE)


class OperationDetail(Operation):
    reconciliations = Reconciliation(many=True, help_text="Verdicts, oldest first.")


class OperationPage(Page):
    operations = Operation(many=True, help_text="Oldest claim first.")


class AgentPaused(s.Serializer):
    name = s.CharField()
    paused = s.BooleanField()
    paused_reason = s.CharField(allow_blank=True)


class AgentDetail(AgentPaused):
    namespace = s.CharField()
    default_profile = s.CharField(allow_null=True)
    allowed_profiles = s.ListField(child=s.CharField())
    daily_cost_cap = s.CharField(allow_null=True, help_text="Money, a decimal string.")
