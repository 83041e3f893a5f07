"""An operation's counts and state take their rules from PostgreSQL domains, as the task's do.

See `agents/migrations/0015_one_column_rules_as_domains.py`: a table's CHECK constraints are
planned again by every statement that writes the table, a domain's once per connection. The
operation's counts are of `lw_count` (created by that migration), its state of
`lw_operation_state`; `operation_state_valid` and the counts' `>= 0` checks are dropped. No
table is rewritten (the domain gets its check after the column changed to it). On SQLite the
rules are the columns' CHECKs.
"""

from django.db import migrations

import agents.domains

STATE = "lw_operation_state"
STATE_RULE = "VALUE IN ('IN_FLIGHT', 'COMMITTED', 'UNKNOWN', 'NOT_COMMITTED')"


def on_postgresql(*statements):
    """A RunPython function that sends `statements` on PostgreSQL, and does nothing elsewhere."""

    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for statement in statements:
                schema_editor.execute(statement)

    return run


COUNTS = ["attempts", "claim_seq", "reconcile_checks"]  # their `>= 0` checks, named by PostgreSQL

ONE_COLUMN_CHECKS = """
    SELECT c.conname FROM pg_constraint c
    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
    WHERE c.conrelid = 'ledger_operation'::regclass AND c.contype = 'c'
      AND cardinality(c.conkey) = 1 AND a.attname = %s
      AND pg_get_constraintdef(c.oid) = format('CHECK ((%%I >= 0))', a.attname)
"""


def drop_count_checks(apps, schema_editor):
    """Django's AlterField keeps a column's check while the field's internal type is the same
    (a count is still a positive integer field to Django): drop the counts' checks here."""
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        for column in COUNTS:
            cursor.execute(ONE_COLUMN_CHECKS, [column])
            for (name,) in cursor.fetchall():
                schema_editor.execute(
                    f"ALTER TABLE ledger_operation DROP CONSTRAINT {schema_editor.quote_name(name)}"
                )


def add_count_checks(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for column in COUNTS:
        schema_editor.execute(
            f"ALTER TABLE ledger_operation ADD CONSTRAINT ledger_operation_{column}_check "
            f"CHECK ({column} >= 0)"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0015_one_column_rules_as_domains"),
        ("ledger", "0002_claim_seq"),
    ]

    operations = [
        migrations.RunPython(
            on_postgresql(f"CREATE DOMAIN {STATE} AS varchar(14)"),
            on_postgresql(f"DROP DOMAIN {STATE}"),
            elidable=False,
        ),
        migrations.RunPython(drop_count_checks, add_count_checks, elidable=False),
        migrations.RemoveConstraint(
            model_name="operation",
            name="operation_state_valid",
        ),
        migrations.AlterField(
            model_name="operation",
            name="attempts",
            field=agents.domains.Count(default=1),
        ),
        migrations.AlterField(
            model_name="operation",
            name="claim_seq",
            field=agents.domains.Count(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="operation",
            name="reconcile_checks",
            field=agents.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="operation",
            name="state",
            field=agents.domains.OperationState(
                choices=[
                    ("IN_FLIGHT", "IN_FLIGHT"),
                    ("COMMITTED", "COMMITTED"),
                    ("UNKNOWN", "UNKNOWN"),
                    ("NOT_COMMITTED", "NOT_COMMITTED"),
                ],
                max_length=14,
            ),
        ),
        migrations.RunPython(
            on_postgresql(
                f"ALTER DOMAIN {STATE} ADD CONSTRAINT {STATE}_check CHECK ({STATE_RULE})"
            ),
            on_postgresql(f"ALTER DOMAIN {STATE} DROP CONSTRAINT {STATE}_check"),
            elidable=False,
        ),
    ]
