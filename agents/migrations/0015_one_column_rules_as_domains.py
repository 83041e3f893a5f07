"""The one-column rules of the rows a decision writes become PostgreSQL domains.

PostgreSQL plans a table's CHECK constraints again for every statement that writes the table,
and the task table had fourteen: each decision's UPDATE of the task paid about 40 us for them,
a third of the statement (see `agents.db.domains`). A domain's check is planned once per
connection. So on PostgreSQL the counts, the task's phase, state and money, and the agent day's
money of the task, model call, tool call and agent day tables are of the domains `lw_count`,
`lw_bigcount`, `lw_phase`, `lw_money` and `lw_task_state`, and the table constraints that held
those rules (`task_state_valid`, `task_cost_non_negative`, `task_phase_positive`,
`agent_day_spent_non_negative`, `agent_day_reserved_non_negative`, and the `>= 0` check of
each count) are dropped. The rules are the same; only where PostgreSQL keeps them moves.

No table is rewritten: the domains are created without their checks and the columns change to
them (binary-compatible, so PostgreSQL keeps each row and index as it is); ledger 0003 does the
same for the operation's columns, and only then does agents 0016 give each domain its check,
which PostgreSQL verifies against every existing value (a scan, not a rewrite). A column
changed to a domain that already has a check is rewritten, with its indexes (PostgreSQL 15):
hence the order. The tables are locked (ACCESS EXCLUSIVE) meanwhile: migrate a large database
in a quiet window.

On SQLite, which has no domains, the same rules are the columns' CHECKs (the table is rebuilt
by Django, as for any changed column); `task_running_has_no_reason`, a rule over two columns,
stays a table constraint on both.

The SQL is written out here, frozen like the rest of a migration; `tests/db/test_domains.py`
compares the database's domains with `agents.db.domains`.
"""

from decimal import Decimal

from django.db import migrations

import agents.db.domains

DOMAINS = [  # name, base type, check
    ("lw_count", "integer", "VALUE >= 0"),
    ("lw_bigcount", "bigint", "VALUE >= 0"),
    ("lw_phase", "integer", "VALUE >= 1"),
    ("lw_money", "numeric(14, 6)", "VALUE >= 0"),
    (
        "lw_task_state",
        "varchar(12)",
        "VALUE IN ('RUNNING', 'COMPLETED', 'PARTIAL', 'FAILED', 'NEEDS_HUMAN', 'STOPPED')",
    ),
]


def on_postgresql(*statements):
    """A RunPython function that sends `statements` on PostgreSQL, and does nothing elsewhere.
    (Ledger 0003 uses this module's helpers too.)"""

    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)

    return run


def domains_created(domains):
    """RunPython functions: create each (name, base, rule) domain without its check, and the
    reverse."""
    return (
        on_postgresql(*(f"CREATE DOMAIN {name} AS {base}" for name, base, _ in domains)),
        on_postgresql(*(f"DROP DOMAIN {name}" for name, _, _ in reversed(domains))),
    )


def domain_checks_added(domains):
    """RunPython functions: give each domain its check (PostgreSQL reads every value of it),
    and the reverse. A check already there is left as it is: an earlier form of this migration
    (commits 1e0232d to 5f4e2fe of this repository) added the checks itself."""

    def add(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        with schema_editor.connection.cursor() as cursor:
            for name, _, rule in domains:
                cursor.execute(
                    "SELECT 1 FROM pg_constraint c JOIN pg_type t ON t.oid = c.contypid "
                    "WHERE t.typname = %s AND c.conname = %s",
                    [name, f"{name}_check"],
                )
                if cursor.fetchone() is None:
                    schema_editor.execute(
                        f"ALTER DOMAIN {name} ADD CONSTRAINT {name}_check CHECK ({rule})"
                    )

    drop = on_postgresql(
        *(f"ALTER DOMAIN {name} DROP CONSTRAINT {name}_check" for name, *_ in domains)
    )
    return add, drop


ONE_COLUMN_CHECKS = """
    SELECT c.conname FROM pg_constraint c
    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
    WHERE c.conrelid = %s::regclass AND c.contype = 'c' AND cardinality(c.conkey) = 1
      AND a.attname = %s AND pg_get_constraintdef(c.oid) = format('CHECK ((%%I >= 0))', a.attname)
"""


def count_checks_dropped(counts):
    """RunPython functions: drop the `>= 0` check of each column of `counts` ({table: columns}),
    and the reverse, which adds them back under PostgreSQL's names for them.

    Django wrote those checks into each column's definition, and its AlterField keeps a
    column's check as long as the field's internal type is the same: a count is still a
    positive integer field to Django.
    """

    def drop(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        quote = schema_editor.quote_name
        with schema_editor.connection.cursor() as cursor:
            for table, columns in counts.items():
                for column in columns:
                    cursor.execute(ONE_COLUMN_CHECKS, [table, column])
                    for (name,) in cursor.fetchall():
                        schema_editor.execute(
                            f"ALTER TABLE {quote(table)} DROP CONSTRAINT {quote(name)}"
                        )

    def add(apps, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        quote = schema_editor.quote_name
        for table, columns in counts.items():
            for column in columns:
                schema_editor.execute(
                    f"ALTER TABLE {quote(table)} ADD CONSTRAINT "
                    f"{quote(f'{table}_{column}_check')} CHECK ({quote(column)} >= 0)"
                )

    return drop, add


COUNTS = {
    "agents_task": [
        "phase", "model_calls", "tool_requests", "tool_executions", "retries", "polls",
        "tokens_used", "tokens_reserved", "stagnant", "trace_seq",
    ],
    "agents_modelcall": [
        "seq", "phase", "round", "est_prompt_tokens", "max_output_tokens", "reserved_tokens",
        "prompt_tokens", "completion_tokens",
    ],
    "agents_toolcall": ["seq", "phase", "duration_ms"],
}  # fmt: skip


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0014_unsettled_and_operation_partial_indexes"),
    ]

    operations = [
        migrations.RunPython(*domains_created(DOMAINS), elidable=False),
        migrations.RunPython(*count_checks_dropped(COUNTS), elidable=False),
        migrations.RemoveConstraint(
            model_name="agentday",
            name="agent_day_spent_non_negative",
        ),
        migrations.RemoveConstraint(
            model_name="agentday",
            name="agent_day_reserved_non_negative",
        ),
        migrations.RemoveConstraint(
            model_name="task",
            name="task_state_valid",
        ),
        migrations.RemoveConstraint(
            model_name="task",
            name="task_cost_non_negative",
        ),
        migrations.RemoveConstraint(
            model_name="task",
            name="task_phase_positive",
        ),
        migrations.AlterField(
            model_name="agentday",
            name="reserved",
            field=agents.db.domains.Money(decimal_places=6, default=Decimal("0"), max_digits=14),
        ),
        migrations.AlterField(
            model_name="agentday",
            name="spent",
            field=agents.db.domains.Money(decimal_places=6, default=Decimal("0"), max_digits=14),
        ),
        migrations.AlterField(
            model_name="modelcall",
            name="completion_tokens",
            field=agents.db.domains.Count(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="modelcall",
            name="est_prompt_tokens",
            field=agents.db.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="modelcall",
            name="max_output_tokens",
            field=agents.db.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="modelcall",
            name="phase",
            field=agents.db.domains.Count(),
        ),
        migrations.AlterField(
            model_name="modelcall",
            name="prompt_tokens",
            field=agents.db.domains.Count(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="modelcall",
            name="reserved_tokens",
            field=agents.db.domains.BigCount(default=0),
        ),
        migrations.AlterField(
            model_name="modelcall",
            name="round",
            field=agents.db.domains.Count(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="modelcall",
            name="seq",
            field=agents.db.domains.Count(),
        ),
        migrations.AlterField(
            model_name="task",
            name="cost_reserved",
            field=agents.db.domains.Money(decimal_places=6, default=Decimal("0"), max_digits=14),
        ),
        migrations.AlterField(
            model_name="task",
            name="cost_spent",
            field=agents.db.domains.Money(decimal_places=6, default=Decimal("0"), max_digits=14),
        ),
        migrations.AlterField(
            model_name="task",
            name="model_calls",
            field=agents.db.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="task",
            name="phase",
            field=agents.db.domains.PhaseNumber(default=1),
        ),
        migrations.AlterField(
            model_name="task",
            name="polls",
            field=agents.db.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="task",
            name="retries",
            field=agents.db.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="task",
            name="stagnant",
            field=agents.db.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="task",
            name="state",
            field=agents.db.domains.TaskState(
                choices=[
                    ("RUNNING", "RUNNING"),
                    ("COMPLETED", "COMPLETED"),
                    ("PARTIAL", "PARTIAL"),
                    ("FAILED", "FAILED"),
                    ("NEEDS_HUMAN", "NEEDS_HUMAN"),
                    ("STOPPED", "STOPPED"),
                ],
                default="RUNNING",
                max_length=12,
            ),
        ),
        migrations.AlterField(
            model_name="task",
            name="tokens_reserved",
            field=agents.db.domains.BigCount(default=0),
        ),
        migrations.AlterField(
            model_name="task",
            name="tokens_used",
            field=agents.db.domains.BigCount(default=0),
        ),
        migrations.AlterField(
            model_name="task",
            name="tool_executions",
            field=agents.db.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="task",
            name="tool_requests",
            field=agents.db.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="task",
            name="trace_seq",
            field=agents.db.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="toolcall",
            name="duration_ms",
            field=agents.db.domains.Count(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="toolcall",
            name="phase",
            field=agents.db.domains.Count(),
        ),
        migrations.AlterField(
            model_name="toolcall",
            name="seq",
            field=agents.db.domains.Count(),
        ),
    ]
