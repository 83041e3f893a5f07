"""One-column rules of the rows a decision writes, kept by PostgreSQL as domains.

A column whose rule names only itself (a count is never negative, a task's state is one of the
six) takes the rule from its type on PostgreSQL: a domain's check is planned once per
connection, where a table CHECK is planned again by every write (figures: docs/BENCHMARKS.md,
"Why the hot path is built this way"). On SQLite the same rule is the column's CHECK. Rules
over several columns stay table constraints.

Each field below names its `Domain`, the rule's one home: the migrations that create the
domains copy its SQL (migrations are frozen), and `tests/db/test_domains.py` compares the
database's domains with these, since Django's migrations do not see a domain's rule change.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from django.db import models

from agents.guard import terms

# Money in Python: a Decimal of at most 14 digits, 6 of them after the point (forms, the admin
# and the API's fields bound it so).
MONEY_DIGITS = {"max_digits": 14, "decimal_places": 6}
_MONEY_UNIT = Decimal(1).scaleb(-MONEY_DIGITS["decimal_places"])  # one millionth


@dataclass(frozen=True)
class Domain:
    """A PostgreSQL domain: `base` narrowed by `rule`, a condition on VALUE. A state's domain
    (`_states`) also keeps its `values` and its `length`, which its field's choices and
    max_length are."""

    name: str
    base: str
    rule: str
    values: tuple[str, ...] = ()
    length: int | None = None

    def check_on(self, column: str) -> str:
        """The rule as a CHECK of the (quoted) `column`, for databases without domains."""
        return self.rule.replace("VALUE", column)

    @property
    def constraint(self) -> str:
        """The name of the domain's CHECK constraint."""
        return f"{self.name}_check"


def _states(name: str, values: tuple[str, ...], length: int) -> Domain:
    """A domain of strings of at most `length` characters, each one of `values`."""
    rule = "VALUE IN (" + ", ".join(f"'{value}'" for value in values) + ")"
    return Domain(name, f"varchar({length})", rule, values, length)


COUNT = Domain("lw_count", "integer", "VALUE >= 0")
BIG_COUNT = Domain("lw_bigcount", "bigint", "VALUE >= 0")
PHASE = Domain("lw_phase", "integer", "VALUE >= 1")
MONEY = Domain("lw_money", "bigint", "VALUE >= 0")
TASK_STATE = _states("lw_task_state", terms.TASK_STATES, 12)
OPERATION_STATE = _states("lw_operation_state", terms.OPERATION_STATES, 14)

DOMAINS = (COUNT, BIG_COUNT, PHASE, MONEY, TASK_STATE, OPERATION_STATE)


class _OfDomain:
    """A field whose column is of `domain` on PostgreSQL; elsewhere its usual type, with the
    domain's rule as the column's CHECK."""

    domain: Domain
    column: str

    def db_type(self, connection: Any) -> str | None:
        if connection.vendor == "postgresql":
            return self.domain.name
        return super().db_type(connection)  # type: ignore[misc]

    def db_check(self, connection: Any) -> str | None:
        if connection.vendor == "postgresql":
            return None
        return self.domain.check_on(connection.ops.quote_name(self.column))


class Count(_OfDomain, models.PositiveIntegerField):
    """A count: never negative."""

    domain = COUNT


class BigCount(_OfDomain, models.PositiveBigIntegerField):
    """A count of tokens: never negative."""

    domain = BIG_COUNT


class PhaseNumber(_OfDomain, models.PositiveIntegerField):
    """A task's phase: the first is 1, each resume adds one."""

    domain = PHASE


def to_micros(amount: Decimal | int | str) -> int:
    """An amount of money as the whole number of millionths its column holds (rounded half
    to even at the sixth place, as a decimal column rounds)."""
    exact = amount if isinstance(amount, Decimal) else Decimal(amount)
    return int(exact.quantize(_MONEY_UNIT, rounding=ROUND_HALF_EVEN).scaleb(6))


def from_micros(micros: int | Decimal) -> Decimal:
    """The amount a column's whole number of millionths stands for, to six places."""
    return Decimal(micros).scaleb(-6).quantize(_MONEY_UNIT)


class MoneyField(models.DecimalField):
    """An amount of money: a Decimal to six places in Python (forms, the admin, the API see a
    decimal field), and in the column a whole number of millionths (`bigint`).

    Integers are exact on every database: SQLite keeps a number with a fraction as a binary
    float, so sums and the in-place updates of the agent's day (`spent = spent + ...`) drifted
    in the last places, and a release could leave a reservation a hair below zero. The
    internal type is the column's, so no database reads it as a decimal of its own.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, **MONEY_DIGITS})

    def get_internal_type(self) -> str:
        return "BigIntegerField"

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if not prepared:
            value = self.get_prep_value(value)
        if value is None or hasattr(value, "as_sql"):
            return value
        return to_micros(value)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Decimal | None:
        return None if value is None else from_micros(value)


class Money(_OfDomain, MoneyField):
    """An amount of money that is never negative (spent, reserved)."""

    domain = MONEY


class _OneOf(_OfDomain, models.CharField):
    """A state: one of its domain's values (the field's choices), at most its length."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", self.domain.length)
        kwargs.setdefault("choices", [(value, value) for value in self.domain.values])
        super().__init__(*args, **kwargs)


class TaskState(_OneOf):
    """A task's state: one of the six."""

    domain = TASK_STATE


class OperationState(_OneOf):
    """A ledger operation's state."""

    domain = OPERATION_STATE
