"""The registry of limits: every limit a task or a profile has, declared once.

Each field of `Limits` (what a task copies from its profile) and of `TriggerRate` (the
profile's task creation rate, not copied) is one entry: its kind, default, bounds, choices,
label, help, the resume grant that raises it, the counter it is measured by. The validators,
the serializers and the response schema, the model fields, the console's words, forms and
bars, the grants, `remaining` and the limit advice all read `LIMITS`; adding a limit is one
entry here and one migration (ARCHITECTURE.md, "Adding a limit").
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from decimal import Decimal
from typing import Any

# Kinds: what a value is, hence its column, its form field and its check.
COUNT = "count"  # a whole number in an integer column
TOKENS = "tokens"  # a whole number in a big integer column
SECONDS = "seconds"  # a whole number of seconds in an integer column
MONEY = "money"  # a Decimal of at most COST_PLACES places
CHOICE = "choice"  # one of `choices`
RATIO = "ratio"  # a number from 0 to 1, or None (off)
WHOLE = (COUNT, TOKENS, SECONDS)

INT_MAX = 2_147_483_647  # PositiveIntegerField on every database Django supports
BIGINT_MAX = 9_223_372_036_854_775_807
# Money columns hold 14 digits with 6 after the point.
MAX_COST = Decimal("99999999.999999")
COST_PLACES = 6

LOWER = "lower"  # a smaller value is the stricter guard
HIGHER = "higher"  # a larger value is the stricter guard

# `usage` of a limit measured by the clock (from the task's creation to its end), not a counter.
CLOCK = "clock"


@dataclass(frozen=True)
class Limit:
    """One limit. `name` is filled in from the field that declares it."""

    kind: str
    default: Any
    label: str  # what a form and the console call it
    help: str  # the API's description; `{default}` is replaced by the default
    minimum: int = 0  # the smallest sensible value of a whole number
    choices: tuple[str, ...] = ()
    # LOWER or HIGHER for numbers; for a choice, the value that is stricter than the other.
    stricter: str = LOWER
    says: str = "allows"  # how a tighten refusal quotes the profile: "(profile allows 3)"
    grant: str | None = None  # the resume grant (and usage, remaining) key that raises it
    noun: str = ""  # the grant's and the bar's name, when not the label
    usage: str | None = None  # the TaskState counter measured against it, or CLOCK
    reserved: str | None = None  # open reservations the gate counts against it as well
    reason: str | None = None  # the stop reason when it is used up
    remaining: bool = False  # listed in a report's `remaining`
    advised: bool = False  # the limit advice compares it with what ended tasks used
    profile_only: bool = False  # a profile's, not copied to its tasks
    name: str = ""

    @property
    def maximum(self) -> int | Decimal | float | None:
        """The largest value the limit may hold (its column's)."""
        if self.kind == MONEY:
            return MAX_COST
        if self.kind == TOKENS:
            return BIGINT_MAX
        if self.kind == RATIO:
            return 1.0
        return INT_MAX if self.kind in WHOLE else None

    @property
    def help_text(self) -> str:
        return self.help.replace("{default}", str(self.default))

    @property
    def title(self) -> str:
        return self.noun or self.label


def limit(kind: str, default: Any, **spec: Any) -> Any:
    """A dataclass field carrying its `Limit`."""
    return field(default=default, metadata={"limit": Limit(kind, default, **spec)})


@dataclass
class Limits:
    """docs/DESIGN.md section 5. A task copies its profile's limits at creation."""

    max_model_calls: int = limit(
        COUNT, 20, label="Model calls", minimum=1, help="Paid model calls (default {default}).",
        grant="model_calls", usage="model_calls", reason="model_budget", remaining=True,
        advised=True,
    )  # fmt: skip
    max_tool_requests: int = limit(
        COUNT, 40, label="Tool requests", minimum=1,
        help="Tool requests: executed, reused and blocked (default {default}).",
        grant="tool_requests", usage="tool_requests", reason="request_budget", remaining=True,
        advised=True,
    )  # fmt: skip
    max_tool_executions: int = limit(
        COUNT, 20, label="Tool executions", minimum=1,
        help="Real tool executions (default {default}).", grant="tool_executions",
        usage="tool_executions", reason="execution_budget", remaining=True, advised=True,
    )  # fmt: skip
    max_same_call: int = limit(
        COUNT, 2, label="Same call allowed (times)", minimum=1,
        help="Identical calls allowed in the window (default {default}).",
    )  # fmt: skip
    repeat_action: str = limit(
        CHOICE, "block", label="On a repeat", choices=("block", "stop"), stricter="stop",
        help="`block` nudges the model once with BLOCK, then stops; `stop` stops at once.",
    )  # fmt: skip
    max_cycle_period: int = limit(
        COUNT, 3, label="Longest cycle detected", minimum=2, stricter=HIGHER, says="detects",
        help="Longest cycle period detected (default {default}; a longer period is stricter).",
    )  # fmt: skip
    max_stagnant: int = limit(
        COUNT, 3, label="Steps without progress", minimum=1, usage="stagnant",
        help="Consecutive steps without verified progress (default {default}).",
    )  # fmt: skip
    max_retries: int = limit(
        COUNT, 3, label="Retries", help="RETRYABLE attempts, all layers together (default "
        "{default}).", grant="retries", usage="retries", reason="retry_budget",
    )  # fmt: skip
    max_polls: int = limit(
        COUNT, 10, label="Polls", help="PENDING polls (default {default}).", grant="polls",
        usage="polls", reason="poll_budget",
    )  # fmt: skip
    max_tokens: int = limit(
        TOKENS, 200_000, label="Tokens", minimum=1,
        help="Prompt plus completion tokens (default {default}).", grant="tokens",
        usage="tokens_used", reserved="tokens_reserved", reason="token_budget", remaining=True,
        advised=True,
    )  # fmt: skip
    max_cost: Decimal = limit(
        MONEY, Decimal("5.00"), label="Cost",
        help="Money, in the currency of the price table (default {default}).", grant="cost",
        usage="cost_spent", reserved="cost_reserved", reason="cost_budget", remaining=True,
        advised=True,
    )  # fmt: skip
    deadline_seconds: int = limit(
        SECONDS, 900, label="Deadline (seconds)", minimum=1, noun="Seconds",
        help="Wall-clock seconds per task (default {default}; a resume grant extends it).",
        grant="seconds", usage=CLOCK, reason="deadline", advised=True,
    )  # fmt: skip
    progress_mode: str = limit(
        CHOICE, "evidence", label="Progress counts", choices=("evidence", "novelty"),
        stricter="evidence", help="`evidence`: only evidence.revision counts as progress; "
        "`novelty`: a data hash never seen in the task counts too.",
    )  # fmt: skip
    near_duplicate_threshold: float | None = limit(
        RATIO, None, label="Near-duplicate similarity (0–1, blank: off)", says="sets",
        help="0..1 similarity from which calls of one tool count as the same call; null "
        "disables the check.",
    )  # fmt: skip
    lease_seconds: int = limit(
        SECONDS, 120, label="Write lease (seconds)", minimum=1,
        help="How long an IN_FLIGHT claim lives without a result (default {default}).",
    )  # fmt: skip
    # Tokens a model-call gate reserves when it carries no estimate and the price table has no
    # default for the model (docs/DESIGN.md section 4, check 5). Not a budget: an agent may only
    # raise it at creation, since a smaller reservation is a looser guard.
    default_estimate_tokens: int = limit(
        COUNT, 4000, label="Tokens reserved by a gate without an estimate", minimum=1,
        stricter=HIGHER, says="reserves", help="Tokens a model-call gate without an estimate "
        "reserves, when the model's price row has no default estimate (default {default}; an "
        "agent may only raise it).",
    )  # fmt: skip

    @classmethod
    def names(cls) -> list[str]:
        return list(_LIMIT_NAMES)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Limits:
        known = {k: v for k, v in raw.items() if k in _LIMIT_NAMES}
        limits = cls(**known)
        limits.max_cost = Decimal(str(limits.max_cost))
        return limits

    def to_dict(self) -> dict[str, Any]:
        # Every field is a scalar: no `asdict` (it copies recursively), read on every decision.
        out = {name: getattr(self, name) for name in _LIMIT_NAMES}
        # Fixed-point: an amount typed as "1e3" is kept as "1000", never "1E+3".
        out["max_cost"] = format(self.max_cost, "f")
        return out


@dataclass
class TriggerRate:
    """A profile's task creation rate per trigger_key; its tasks do not copy it."""

    max_tasks_per_trigger: int = limit(
        COUNT, 5, label="Tasks per trigger", minimum=1, profile_only=True,
        help="Tasks one trigger_key may create per window (profiles only).",
    )  # fmt: skip
    trigger_window_seconds: int = limit(
        SECONDS, 3600, label="Trigger window (seconds)", minimum=1, profile_only=True,
        help="That window, in seconds; beyond it creation answers 429.",
    )  # fmt: skip


_LIMIT_NAMES = tuple(f.name for f in fields(Limits))

# Every limit, task limits first, in declaration order.
LIMITS: tuple[Limit, ...] = tuple(
    replace(f.metadata["limit"], name=f.name) for cls in (Limits, TriggerRate) for f in fields(cls)
)
BY_NAME: dict[str, Limit] = {spec.name: spec for spec in LIMITS}
TASK_LIMITS: tuple[Limit, ...] = tuple(spec for spec in LIMITS if not spec.profile_only)
PROFILE_ONLY: tuple[Limit, ...] = tuple(spec for spec in LIMITS if spec.profile_only)
# The resume grant's dimensions, in order, each with the limit it raises.
GRANTS: tuple[Limit, ...] = tuple(spec for spec in LIMITS if spec.grant)
GRANT_LIMITS: dict[str, str] = {spec.grant: spec.name for spec in GRANTS if spec.grant}
# The budget reasons, each with the grant that lifts it.
BUDGET_GRANTS: dict[str, str] = {
    spec.reason: spec.grant for spec in GRANTS if spec.reason and spec.grant
}
PROFILE_DEFAULTS: dict[str, Any] = {spec.name: spec.default for spec in PROFILE_ONLY}


def used(spec: Limit, counters: object) -> int | Decimal:
    """How much of the limit is taken on a task (a `TaskState` or a task row, which name their
    counters alike): its counter plus the reservations the gate counts against it."""
    assert spec.usage and spec.usage != CLOCK, spec.name
    taken: int | Decimal = getattr(counters, spec.usage)
    if spec.reserved:
        taken += getattr(counters, spec.reserved)
    return taken
