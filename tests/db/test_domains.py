"""The one-column rules of the rows a decision writes: PostgreSQL domains there, the columns'
CHECKs on SQLite, the same rules on both (`agents.db.domains`; migrations agents 0015, ledger
0003 and agents 0016)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from agents.db import domains
from agents.models import AgentDay, ModelCall, Task, ToolCall
from ledger.models import Operation

pytestmark = pytest.mark.django_db

HOT_TABLES = [Task, ModelCall, ToolCall, AgentDay, Operation]


def _domain_fields() -> list:
    return [
        field
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if isinstance(field, domains._OfDomain)
    ]


def _refused(write) -> bool:
    """Whether the database refuses `write` (the test's transaction survives either way)."""
    try:
        with transaction.atomic():
            write()
    except IntegrityError:
        return True
    return False


def test_every_field_of_a_domain_is_on_a_table_a_decision_writes():
    tables = {model._meta.db_table for model in HOT_TABLES}
    fields = _domain_fields()
    assert {field.model._meta.db_table for field in fields} == tables


@pytest.mark.parametrize(
    ("model", "column", "bad", "good"),
    [
        (Task, "model_calls", -1, 0),
        (Task, "tokens_reserved", -1, 0),
        (Task, "trace_seq", -1, 7),
        (Task, "phase", 0, 2),
        (Task, "state", "PAUSED", "STOPPED"),
        (Task, "cost_reserved", Decimal("-0.000001"), Decimal("0")),
        (ModelCall, "prompt_tokens", -5, None),
        (ModelCall, "reserved_tokens", -1, 10),
        (ToolCall, "duration_ms", -1, None),
        (AgentDay, "spent", Decimal("-1"), Decimal("1.5")),
        (Operation, "attempts", -1, 3),
        (Operation, "state", "DONE", "UNKNOWN"),
    ],
)
def test_the_database_refuses_what_the_rule_forbids(make_task, agent_row, model, column, bad, good):
    """Written past the ORM's validation (an UPDATE), as a bug in a service would write it."""
    task = make_task()
    if model is Task:
        rows = Task.objects.filter(pk=task.pk)
    elif model is AgentDay:
        AgentDay.objects.create(agent=agent_row, day=date(2026, 1, 2))
        rows = AgentDay.objects.filter(agent=agent_row)
    elif model is Operation:
        Operation.objects.create(
            namespace="ns", operation_key="k", tool="pay", fingerprint="f", state="IN_FLIGHT",
            task=task, claimed_at=task.created_at,
        )  # fmt: skip
        rows = Operation.objects.filter(namespace="ns")
    else:
        model.objects.create(task=task, seq=1, phase=1, **_call_fields(model))
        rows = model.objects.filter(task=task)
    # A task that is not running has a reason (the rule over two columns).
    also = {"reason": "operator_stop"} if (model, column) == (Task, "state") else {}
    assert _refused(lambda: rows.update(**{column: bad}, **also))
    assert not _refused(lambda: rows.update(**{column: good}, **also))
    assert rows.values_list(column, flat=True).get() == good


def _call_fields(model) -> dict:
    if model is ModelCall:
        return {"decision": "ALLOW"}
    return {"tool": "search", "decision": "EXECUTE"}


def test_a_running_task_with_a_reason_is_still_refused(make_task):
    """The rule over two columns stays a table constraint on both databases."""
    task = make_task()
    assert _refused(lambda: Task.objects.filter(pk=task.pk).update(reason="operator_stop"))


@pytest.mark.postgres
def test_the_database_domains_are_the_code_s(on_postgres):
    """A rule changed in `agents.db.domains` without a migration fails here: Django's migrations
    do not see a domain's rule change by themselves."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT t.typname, format_type(t.typbasetype, t.typtypmod), c.conname,
                   pg_get_constraintdef(c.oid)
            FROM pg_type t JOIN pg_constraint c ON c.contypid = t.oid
            WHERE t.typtype = 'd' AND t.typname LIKE 'lw\\_%%'
            """
        )
        found = {name: (base, constraint, rule) for name, base, constraint, rule in cursor}
        expected = {}
        with transaction.atomic():
            # Each domain of the code, created under another name and read back as PostgreSQL
            # words it; rolled back.
            for domain in domains.DOMAINS:
                cursor.execute(f"CREATE DOMAIN probe_{domain.name} AS {domain.base}")
                cursor.execute(
                    f"ALTER DOMAIN probe_{domain.name} ADD CONSTRAINT probe CHECK ({domain.rule})"
                )
                cursor.execute(
                    """
                    SELECT format_type(t.typbasetype, t.typtypmod), pg_get_constraintdef(c.oid)
                    FROM pg_type t JOIN pg_constraint c ON c.contypid = t.oid
                    WHERE t.typname = %s
                    """,
                    [f"probe_{domain.name}"],
                )
                base, rule = cursor.fetchone()
                expected[domain.name] = (base, domain.constraint, rule)
            transaction.set_rollback(True)
    assert found == expected


@pytest.mark.postgres
def test_each_rule_is_its_column_s_type_and_no_table_check(on_postgres):
    """On PostgreSQL a column of a domain holds its rule in its type; the tables a decision
    writes keep one CHECK, the rule over two columns (a table's CHECKs are planned again by
    every statement that writes it)."""
    with connection.cursor() as cursor:
        for field in _domain_fields():
            cursor.execute(
                """
                SELECT format_type(atttypid, atttypmod) FROM pg_attribute
                WHERE attrelid = %s::regclass AND attname = %s
                """,
                [field.model._meta.db_table, field.column],
            )
            assert cursor.fetchone() == (field.domain.name,), field
        cursor.execute(
            """
            SELECT conrelid::regclass::text, conname FROM pg_constraint
            WHERE contype = 'c' AND conrelid = ANY (%s::regclass[])
            """,
            [[model._meta.db_table for model in HOT_TABLES]],
        )
        assert sorted(cursor.fetchall()) == [("agents_task", "task_running_has_no_reason")]


def test_on_sqlite_each_rule_is_its_column_s_check():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's form of the rules")
    with connection.cursor() as cursor:
        for model in HOT_TABLES:
            cursor.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s",
                [model._meta.db_table],
            )
            (sql,) = cursor.fetchone()
            for field in _domain_fields():
                if field.model is model:
                    check = field.domain.check_on(connection.ops.quote_name(field.column))
                    assert f"CHECK ({check})" in sql, (model, field.column)


def _files() -> dict[str, int]:
    """Each table's and index's file on disk: a rewrite gives it a new one."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, c.relfilenode FROM pg_class c
            WHERE c.oid = ANY (%s::regclass[])
               OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = ANY (%s::regclass[]))
            """,
            [[model._meta.db_table for model in HOT_TABLES]] * 2,
        )
        return dict(cursor.fetchall())


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_migrations_to_domains_rewrite_no_table_and_go_back(on_postgres):
    """Changing a column to a domain that already has its check rewrites the table and its
    indexes (PostgreSQL 15): the checks come last, after every column changed (agents 0016)."""
    before_domains = [("agents", "0014_unsettled_and_operation_partial_indexes"),
                      ("ledger", "0002_claim_seq")]  # fmt: skip
    with_domains = [("agents", "0016_domain_checks"),
                    ("ledger", "0003_one_column_rules_as_domains")]  # fmt: skip
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    executor.migrate(before_domains)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_type WHERE typname LIKE 'lw\\_%%'")
            assert cursor.fetchone() == (0,)
            cursor.execute(
                "SELECT count(*) FROM pg_constraint WHERE conrelid = 'agents_task'::regclass "
                "AND contype = 'c'"
            )
            assert cursor.fetchone() == (14,)  # the fourteen checks, as before the domains
        files = _files()
        executor = MigrationExecutor(connection)
        executor.migrate(with_domains)
        assert _files() == files
    finally:
        # (agents 0017 then rewrites the money columns' tables: their values are rescaled.)
        executor = MigrationExecutor(connection)
        executor.migrate(leaves)
