"""Agents, tokens, limit profiles, tasks, phases and the trace.

Counters and the detection window live on the task row so that one decision reads and writes one
row, whatever the length of the trace. Database constraints carry what they can.
"""

from __future__ import annotations

import hashlib
import secrets
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.core.validators import MinValueValidator
from django.db import connections, models, transaction
from django.db.models import Q

from agents.db.domains import BigCount, Count, Money, MoneyField, PhaseNumber, TaskState
from agents.db.ids import uuid7
from agents.db.read_often import ReadOften
from agents.guard import registry, terms

REASON_CHOICES = [(r, r) for r in terms.REASONS]
DECISION_CHOICES = [(d, d) for d in terms.DECISIONS]
EFFECT_CHOICES = [(terms.READ, terms.READ), (terms.WRITE, terms.WRITE)]


def limit_column(spec: registry.Limit) -> models.Field:
    """A limit profile's column for a limit of the registry: its kind's type, its default,
    its smallest value, its help."""
    common: dict = {"default": spec.default, "help_text": spec.help_text}
    if spec.minimum:
        common["validators"] = [MinValueValidator(spec.minimum)]
    if spec.kind == registry.MONEY:
        return MoneyField(**common)
    if spec.kind == registry.TOKENS:
        return models.PositiveBigIntegerField(**common)
    if spec.kind == registry.CHOICE:
        choices = [(choice, choice) for choice in spec.choices]
        return models.CharField(max_length=8, choices=choices, **common)
    if spec.kind == registry.RATIO:
        return models.FloatField(null=True, blank=True, **common)
    return models.PositiveIntegerField(**common)


class MinuteOf(models.Func):
    """A timestamp cut to its minute (UTC), as an expression a stored generated column accepts:
    PostgreSQL's `date_bin` (immutable; `date_trunc` depends on the session's time zone), and on
    SQLite, which keeps a timestamp as text, its first 16 characters ("YYYY-MM-DD HH:MM")."""

    arity = 1
    template = "date_bin('1 minute', %(expressions)s, TIMESTAMPTZ '2000-01-01 00:00:00+00')"
    output_field = models.DateTimeField()

    def as_sqlite(self, compiler, connection, **extra):
        # No ", " in it: Django's SQLite introspection splits a table's SQL on ", " to find
        # its columns, and a column defined with one would break it.
        return self.as_sql(compiler, connection, template="substr(%(expressions)s,1,16)", **extra)


class ProfileQuerySet(models.QuerySet):
    def held(self) -> list[LimitProfile]:
        """The profiles, each held (FOR KEY SHARE) until the transaction ends.

        Whatever is about to point at a profile (a new task, an agent's grant or default) reads
        it this way: a delete, which locks the profile FOR UPDATE first, then waits for it or
        it for the delete, and a profile deleted meanwhile is simply not found, where a plain
        read would find it and the write would break its foreign key. Profiles are held after
        the agent row, never before (`configuration.profile_delete` keeps the same order).
        Many holders never wait for each other. SQLite writes one transaction at a time.
        """
        assert transaction.get_connection(self.db).in_atomic_block, "held() needs a transaction"
        if connections[self.db].vendor != "postgresql":
            return list(self)
        try:
            sql, params = self.query.sql_with_params()
        except EmptyResultSet:  # `name__in=[]`: no profile to hold
            return []
        table = connections[self.db].ops.quote_name(LimitProfile._meta.db_table)
        return list(self.raw(f"{sql} FOR KEY SHARE OF {table}", params))

    def first_held(self) -> LimitProfile | None:
        """The first of `held()`, or None."""
        rows = self.held()
        return rows[0] if rows else None


class LimitProfile(models.Model):
    """A named set of limits (docs/DESIGN.md section 5). Tasks copy them at creation."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    # One column per limit of the registry (`limit_column`).
    locals().update({spec.name: limit_column(spec) for spec in registry.LIMITS})
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ProfileQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(max_cost__gte=0), name="profile_max_cost_non_negative"
            ),
            models.CheckConstraint(
                condition=Q(near_duplicate_threshold__isnull=True)
                | Q(near_duplicate_threshold__gte=0, near_duplicate_threshold__lte=1),
                name="profile_near_duplicate_in_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def limits(self) -> terms.Limits:
        return terms.Limits.from_dict({name: getattr(self, name) for name in terms.Limits.names()})


class Agent(ReadOften):
    """An identity that runs tasks. `paused` is the agent-level kill switch."""

    name = models.SlugField(max_length=64, unique=True)
    namespace = models.CharField(max_length=100)
    default_profile = models.ForeignKey(
        LimitProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    daily_cost_cap = MoneyField(null=True, blank=True)
    # Profiles an admin granted the agent besides its default: any other one answers 403
    # PROFILE_NOT_ALLOWED at task creation, so an agent cannot loosen its own guard.
    allowed_profiles = models.ManyToManyField(
        LimitProfile, blank=True, related_name="granted_agents"
    )
    paused = models.BooleanField(default=False)
    paused_reason = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        permissions = [
            ("pause_agent", "Can pause and unpause an agent"),
            ("manage_tokens", "Can issue and revoke API tokens"),
        ]

    def __str__(self) -> str:
        return self.name


class AgentDay(models.Model):
    """An agent's money for one UTC day: settled spend and open reservations.

    Kept as a row so the spend-cap check reads one row instead of summing the day's calls.
    """

    # No index of its own: the unique (agent, day) index serves every lookup by agent, and
    # one index fewer is one write fewer when a day row is inserted. The day has one (the
    # day's totals of all agents: console, metrics); updates leave both untouched, so a
    # decision's change to the day row stays a HOT update.
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="days", db_index=False)
    day = models.DateField()
    spent = Money(default=Decimal("0"))
    reserved = Money(default=Decimal("0"))

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "day"], name="agent_day_unique"),
        ]
        indexes = [models.Index(fields=["day"], name="agent_day_day")]


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(ReadOften):
    """A bearer token, stored as its SHA-256. Belongs to an agent or to a user (operator)."""

    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    name = models.CharField(max_length=100, blank=True)
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.CASCADE, related_name="tokens"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_tokens",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(agent__isnull=False) & Q(user__isnull=True))
                | (Q(agent__isnull=True) & Q(user__isnull=False)),
                name="token_has_exactly_one_owner",
            )
        ]

    @staticmethod
    def live(key_hash: str, path: str = "") -> Q:
        """The one rule of a token that authenticates: its hash matches and it is not revoked.
        `path` reaches the tokens from another model (`"agent__tokens__"`): the task lock of a
        decision checks an agent's token in its own statement (`agents.taskrow.AgentClaim`)."""
        return Q(**{f"{path}key_hash": key_hash, f"{path}revoked_at__isnull": True})

    @staticmethod
    def generate() -> tuple[str, str, str]:
        """Returns (raw token, its hash, its display prefix). The raw token is shown once."""
        raw = "lw_" + secrets.token_urlsafe(32)
        return raw, hash_token(raw), raw[:10]


LOOP_LABELS = [("real_loop", "real loop"), ("false_stop", "false stop")]


class Task(ReadOften):
    """One user goal: state, limits, usage counters, verified revision and detection window."""

    # Time-ordered (version 7): a fresh task's trace rows go on its indexes' right edge.
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No index of its own: `task_trigger` (agent, trigger_key, created_at) serves every lookup
    # by agent, and each index is one more entry written on every decision (migration 0012).
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="tasks", db_index=False)
    profile = models.ForeignKey(
        LimitProfile, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    goal = models.TextField()
    external_ref = models.CharField(max_length=200, blank=True)
    trigger_key = models.CharField(max_length=200, blank=True)
    state = TaskState(default=terms.RUNNING)
    reason = models.CharField(max_length=32, choices=REASON_CHOICES, blank=True)
    phase = PhaseNumber(default=1)
    limits = models.JSONField()
    # The limits the task was created with: a non-admin operator's resume grant is bounded
    # by them (agents.guard.lifecycle.grant_bound).
    initial_limits = models.JSONField(default=dict)
    deadline_at = models.DateTimeField()
    # usage counters: never reset, not even by a resume
    model_calls = Count(default=0)
    tool_requests = Count(default=0)
    tool_executions = Count(default=0)
    retries = Count(default=0)
    polls = Count(default=0)
    tokens_used = BigCount(default=0)
    tokens_reserved = BigCount(default=0)
    cost_spent = Money(default=Decimal("0"))
    cost_reserved = Money(default=Decimal("0"))
    # progress and detection
    revision = models.BigIntegerField(default=0)
    stagnant = Count(default=0)
    window = models.JSONField(default=list)
    blocked = models.JSONField(default=list)
    pending = models.JSONField(default=list)  # fingerprints executed, result not reported yet
    awaited = models.JSONField(default=list)  # fingerprints whose last result was PENDING
    signatures = models.JSONField(default=list)
    # Texts of the last plans and reflection, kept only when a similarity threshold is set
    # (the repeated-output rule compares them by similarity; see guard.model).
    plans = models.JSONField(default=list)
    reflection = models.TextField(blank=True)
    # An operator's verdict on a stop, for tuning the similarity threshold (loop_eval --from-db).
    loop_label = models.CharField(max_length=12, choices=LOOP_LABELS, blank=True)
    milestones = models.JSONField(default=list)
    report = models.JSONField(null=True, blank=True)
    trace_seq = Count(default=0)  # orders model and tool calls together
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # Not indexed: every decision writes it, and PostgreSQL updates a row in place (HOT: no new
    # index entries) only when no indexed column changes. The console's list, newest activity
    # first, goes by `active_minute` then `updated_at` (the same order), and only the minute is
    # indexed: it changes at most once a minute of a task's activity (migration 0013).
    updated_at = models.DateTimeField(auto_now=True)
    active_minute = models.GeneratedField(
        expression=MinuteOf("updated_at"), output_field=models.DateTimeField(), db_persist=True
    )
    ended_at = models.DateTimeField(null=True, blank=True)
    # When retention removed the trace rows, events and seen hashes this task had before then
    # (agents.services.retention); the counters, phases and stop report stay.
    trace_pruned_at = models.DateTimeField(null=True, blank=True)
    # Set only when the goal or external_ref holds a secret (agents.redaction.
    # masked_search_text): the two masked, which the console's search reads instead of them.
    # Written once, when the task is created; null (no bytes in the row) for every other task.
    masked_search = models.TextField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        permissions = [
            ("stop_task", "Can stop a task"),
            ("resume_task", "Can resume a task"),
            ("change_task_limits", "Can change a task's limits"),
        ]
        indexes = [
            models.Index(fields=["state", "deadline_at"], name="task_state_deadline"),
            models.Index(fields=["agent", "trigger_key", "created_at"], name="task_trigger"),
            models.Index(fields=["active_minute"], name="task_activity"),
            # Retention's candidates: ended, trace still there. Written only when a task
            # stops, resumes or is pruned, never by a decision of a running task.
            models.Index(
                fields=["ended_at"],
                name="task_prunable",
                condition=Q(ended_at__isnull=False, trace_pruned_at__isnull=True),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(state="RUNNING", reason="") | ~Q(state="RUNNING"),
                name="task_running_has_no_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.goal[:40]} ({self.state})"

    @property
    def terminal(self) -> bool:
        return self.state in terms.TERMINAL_STATES

    @property
    def code(self) -> str | None:
        return terms.REASON_CODES.get(self.reason) if self.reason else None


class SeenHash(models.Model):
    """A data hash a task has seen (novelty progress mode), one row per task and hash.

    Kept out of the task row so a decision looks up one hash by index instead of reading and
    rewriting every hash the task ever saw.
    """

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="seen_hash_rows")
    hash = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "hash"], name="seen_hash_unique_per_task")
        ]


class RequestAnswer(models.Model):
    """The answer a decision request with a `request_id` got, kept with its task, so that a
    repeat of the request (a client resending one whose answer it lost) is answered the same
    and counts nothing. `digest` names what was asked (endpoint, path, body): the same id for
    another request is refused, never answered with this one's answer."""

    # The unique index leads with the task: no index of its own.
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="request_answers", db_index=False
    )
    # Text, not a bounded column: an id in a report arrives encoded (agents.db.storable).
    request_id = models.TextField()
    digest = models.CharField(max_length=64)
    answer = models.JSONField()
    # The trace row the answer names (a gate's model call, a tool request's call), by its seq:
    # its id comes back only with the decision's closing writes, after the answer was made.
    call_seq = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "request_id"], name="request_answer_unique")
        ]


class Phase(models.Model):
    """An execution stage. Phase 1 starts at creation, each authorized resume starts the next."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="phases")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField(auto_now_add=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    reason = models.TextField(blank=True)
    grant = models.JSONField(default=dict)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_state = models.CharField(max_length=12, blank=True)
    end_reason = models.CharField(max_length=32, blank=True)
    report = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["task", "number"]
        constraints = [
            models.UniqueConstraint(fields=["task", "number"], name="phase_unique_number")
        ]


# A model call holding a reservation that nothing has settled: allowed, its usage not reported,
# not charged by the reservation sweep (what the sweep looks for, and its index's condition).
UNSETTLED = Q(decision=terms.ALLOW, settled_at=None, expired=False)


class ModelCall(ReadOften):
    """One request to the model-call gate, and its usage report once settled."""

    # Served by the unique (task, seq) index: no index of its own (one write fewer per gate).
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="model_call_rows", db_index=False
    )
    seq = Count()
    phase = Count()
    round = Count(null=True, blank=True)
    model = models.CharField(max_length=100, blank=True)
    decision = models.CharField(max_length=8, choices=DECISION_CHOICES)
    reason = models.CharField(max_length=32, blank=True)
    est_prompt_tokens = Count(default=0)
    max_output_tokens = Count(default=0)
    reserved_cost = MoneyField(default=Decimal("0"))
    reserved_tokens = BigCount(default=0)
    prompt_tokens = Count(null=True, blank=True)
    completion_tokens = Count(null=True, blank=True)
    cost = MoneyField(null=True, blank=True)
    signature = models.CharField(max_length=64, blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    # What the guard's loop rules counted when it decided (`terms.Outcome.marks`); null: none.
    marks = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    settled_at = models.DateTimeField(null=True, blank=True)
    expired = models.BooleanField(default=False)  # reservation charged as reserved by the sweep

    class Meta:
        ordering = ["task", "seq"]
        indexes = [
            # The reservation sweep's rows only (`selectors.unsettled_reservations`): an ALLOW
            # whose usage was never reported and that the sweep has not charged. A settled call
            # leaves it, so it holds the few calls in flight, not every call ever made, and a
            # usage report writes no entry in it (it wrote one in the index on every call).
            models.Index(fields=["created_at"], name="mc_unsettled", condition=UNSETTLED)
        ]
        constraints = [models.UniqueConstraint(fields=["task", "seq"], name="model_call_seq")]


class ToolCall(ReadOften):
    """One request to the tool gate, with its decision and, once reported, its result."""

    # Served by the unique (task, seq) index: no index of its own (one write fewer per request).
    task = models.ForeignKey(
        Task, on_delete=models.CASCADE, related_name="tool_call_rows", db_index=False
    )
    seq = Count()
    phase = Count()
    model_call = models.ForeignKey(
        ModelCall,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="requested_tool_calls",
    )
    call_id = models.CharField(max_length=200, blank=True)
    tool = models.CharField(max_length=200)
    args = models.JSONField(default=dict)
    # What the guard's loop rules counted when it decided (`terms.Outcome.marks`); null: none.
    marks = models.JSONField(null=True, blank=True)
    effect = models.CharField(max_length=5, choices=EFFECT_CHOICES)
    operation_key = models.CharField(max_length=300, blank=True)
    job_id = models.CharField(max_length=200, blank=True)
    fingerprint = models.CharField(max_length=64, blank=True)
    args_text = models.TextField(blank=True)
    decision = models.CharField(max_length=8, choices=DECISION_CHOICES)
    reason = models.CharField(max_length=32, blank=True)
    # Indexed only where set (`tool_call_operation`): a read, most of the requests, has no
    # operation and writes no entry.
    operation = models.ForeignKey(
        "ledger.Operation",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tool_calls",
        db_index=False,
    )
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    result_kind = models.CharField(max_length=32, blank=True)
    result_code = models.CharField(max_length=100, blank=True)
    result_data = models.JSONField(null=True, blank=True)
    # Top-level key -> short hash of its value, after the tool policy's result rules: enough
    # to say which keys changed between two results (task page, advisor) without the data.
    result_keys = models.JSONField(null=True, blank=True)
    # Set when novelty judged the result new: the keys that made it so (changed from the last
    # result of the same call, else of the same tool, in the `KEYS_LOOKBACK` trace rows before
    # it: agents.guard.novelty); [] when only a data_hash was sent.
    novel_keys = models.JSONField(null=True, blank=True)
    result_error = models.TextField(blank=True)
    evidence = models.JSONField(null=True, blank=True)
    result_decision = models.CharField(max_length=8, blank=True)
    result_reason = models.CharField(max_length=32, blank=True)
    revision_after = models.BigIntegerField(null=True, blank=True)
    duration_ms = Count(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    reported_at = models.DateTimeField(null=True, blank=True)
    # Set when the execution's claim expired or was reconciled: it left the task's pending set.
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["task", "seq"]
        indexes = [
            models.Index(
                fields=["operation"],
                name="tool_call_operation",
                condition=Q(operation__isnull=False),
            )
        ]
        constraints = [models.UniqueConstraint(fields=["task", "seq"], name="tool_call_seq")]


class EventKind(models.TextChoices):
    """What an event records; its label is the words the console shows for it."""

    TASK_CREATED = "task_created", "created the task"
    STOP_REQUESTED = "stop_requested", "asked to stop"
    STOP_LABELLED = "stop_labelled", "labelled the stop"
    TASK_STOPPED = "task_stopped", "task stopped"
    TASK_COMPLETED = "task_completed", "task completed"
    TASK_RESUMED = "task_resumed", "resumed the task"
    LIMITS_CHANGED = "limits_changed", "changed the task's limits"
    OPERATION_RECONCILED = "operation_reconciled", "reconciled an operation"
    RECONCILE_NO_ANSWER = "reconcile_no_answer", "the reconciler gave no answer"
    GUARD_TRIGGER = "guard_trigger", "guard triggered"
    LEASE_EXPIRED = "lease_expired", "a write's lease expired"
    RESERVATION_EXPIRED = "reservation_expired", "a model call's reservation expired"
    LATE_RESULT = "late_result", "a late result arrived"
    FINISH_REQUESTED = "finish_requested", "asked to finish"
    TRIGGER_LOOP = "trigger_loop", "trigger loop refused"
    AGENT_PAUSED = "agent_paused", "paused the agent"
    AGENT_UNPAUSED = "agent_unpaused", "unpaused the agent"
    PROFILE_CREATED = "profile_created", "created a limit profile"
    PROFILE_CHANGED = "profile_changed", "changed a limit profile"
    PROFILE_DELETED = "profile_deleted", "deleted a limit profile"
    TOOL_POLICY_CHANGED = "tool_policy_changed", "changed a tool policy"
    AGENT_PROFILES_CHANGED = "agent_profiles_changed", "changed the profiles an agent may use"
    TOKEN_ISSUED = "token_issued", "issued an API token"
    TOKEN_REVOKED = "token_revoked", "revoked an API token"
    SIGNIN_LOCKED_OUT = "signin_locked_out", "locked out of sign-in"
    SIGNIN_UNLOCKED = "signin_unlocked", "lifted a sign-in lockout"


class Event(models.Model):
    """Append-only audit and trace log: guard triggers, stops, resumes, reconciliations."""

    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    operation = models.ForeignKey(
        "ledger.Operation", null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    kind = models.CharField(max_length=40, db_index=True, choices=EventKind.choices)
    phase = models.PositiveIntegerField(null=True, blank=True)
    actor = models.CharField(max_length=150)  # "agent:<name>", "user:<username>", "system:<job>"
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    reason = models.TextField(blank=True)
    code = models.CharField(max_length=40, blank=True)
    detail = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["created_at", "id"]


class ToolPolicy(models.Model):
    """Per-tool settings: fields ignored by the fingerprint, near-duplicate, reconciler URL,
    fields masked wherever an operator reads this tool's args or results, and what the data
    hash of its results leaves out (novelty progress)."""

    tool = models.CharField(max_length=200, unique=True)
    ignore_fields = models.JSONField(default=list, blank=True)
    redact_fields = models.JSONField(
        default=list,
        blank=True,
        help_text="Key names masked in this tool's args and results in the console and the "
        "operator API (case and separators ignored), on top of the built-in policy.",
    )
    near_duplicate_threshold = models.FloatField(null=True, blank=True)
    similarity_provider = models.CharField(
        max_length=12,
        choices=[("lexical", "lexical"), ("semantic", "semantic"), ("embedding", "embedding")],
        default="lexical",
        help_text="How near-duplicate calls are scored when a threshold is set: lexical (built "
        "in), semantic (the embedded model of the loopwarden[semantic] extra) or embedding (the "
        "endpoint in LOOPWARDEN_EMBEDDINGS_URL; falls back to lexical).",
    )
    reconcile_url = models.URLField(blank=True)
    # Novelty progress (issue 13): what the data hash of this tool's results leaves out.
    ignore_result_fields = models.JSONField(default=list, blank=True)
    ignore_volatile_keys = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "tool policies"
        ordering = ["tool"]

    def __str__(self) -> str:
        return self.tool


class ModelPrice(models.Model):
    """Price per million tokens, used to reserve before and settle after a model call.

    The row named "*" is the default for models without their own row.
    """

    model = models.CharField(max_length=100, unique=True)
    input_per_million = MoneyField(default=Decimal("0"))
    output_per_million = MoneyField(default=Decimal("0"))
    default_estimate_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Tokens a gate for this model reserves when it carries no estimate; "
        "empty: the task profile's default.",
    )

    class Meta:
        ordering = ["model"]


class CatalogVersion(models.Model):
    """One row whose number changes whenever an admin changes a price or a tool policy.

    Every web process keeps those tables in memory (`agents.services.catalog`) and reads this
    number inside the statement that locks the task, so a change is seen by every worker at
    its next decision without a statement of its own. No row (a fresh or flushed database)
    reads as None, which is a version too.
    """

    number = models.BigIntegerField(default=0)


class Notification(models.Model):
    """An operator notification about one phase of a task (NEEDS_HUMAN, spend cap).

    The unique (task, phase, kind) row is what makes it go out once: workers claim it with a
    conditional update before sending and record each channel as it succeeds, so a retry or a
    duplicate delivery of the job never sends a channel twice.
    """

    NEEDS_HUMAN = "needs_human"
    SPEND_CAP = "spend_cap"
    KINDS = [(NEEDS_HUMAN, NEEDS_HUMAN), (SPEND_CAP, SPEND_CAP)]

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="notifications")
    phase = models.PositiveIntegerField()
    kind = models.CharField(max_length=20, choices=KINDS)
    channels = models.JSONField(default=list, blank=True)  # delivered so far: webhook, email
    attempts = models.PositiveIntegerField(default=0)
    claimed_until = models.DateTimeField(null=True, blank=True)  # a worker is sending until then
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)  # retries exhausted

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "phase", "kind"], name="notification_once_per_phase"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.task_id} phase {self.phase}"


class TaskStateDelta(models.Model):
    """Changes to the count of tasks in a state, written by the database's triggers on the task
    table (migration 0027): +1 for a state a task entered, -1 for the one it left.

    The console's and the metrics' counts by state are the sums of these rows
    (`selectors.task_counts_by_state`), not a count of every task (94 ms at 200,000 tasks, and
    growing). Rows are only appended, so two transactions never wait for each other on a
    shared counter; `services.state_counts.state_counts_compact` folds them into one row a
    state from the rollup job. A trigger, not the services, so a decision that stops its task
    sends no statement more, and no road that changes a state (bulk inserts included) is
    missed."""

    state = models.CharField(max_length=12)
    n = models.BigIntegerField()


class DailyRollup(models.Model):
    """Usage and breaker trips of one UTC day, per agent and task type (the profile's name).

    Rebuilt from the trace by `agents.services.rollups.rollup_day`; never edited by hand.
    """

    day = models.DateField()
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="rollups")
    profile = models.CharField(max_length=64, blank=True)  # "" for tasks without a profile
    model_calls = models.PositiveIntegerField(default=0)
    tool_executions = models.PositiveIntegerField(default=0)
    tokens = models.PositiveBigIntegerField(default=0)
    cost = MoneyField(default=Decimal("0"))
    trips = models.JSONField(default=dict, blank=True)  # {"GUARD_LOOP_DETECTED": 2, ...}
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-day", "agent", "profile"]
        constraints = [
            models.UniqueConstraint(fields=["day", "agent", "profile"], name="daily_rollup_unique")
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.agent_id} {self.profile or '-'}"

    @property
    def trips_total(self) -> int:
        return sum(self.trips.values())
