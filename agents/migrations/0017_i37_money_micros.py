"""Money is kept as whole millionths (`bigint`) in every money column, on every database.

SQLite keeps a number with a fraction as a binary float: sums drifted in the last places
(76.2829669999999 for 76.282967) and the in-place updates of an agent's day could leave a
released reservation a hair below zero, which its CHECK refused (a usage report answered 500).
Integers are exact everywhere; `agents.db.domains.MoneyField` turns them into Decimals to six
places and back, so nothing above the models changes.

PostgreSQL: the domain `lw_money` (numeric(14, 6), never negative) becomes `lw_money` over
bigint, and each column changes type with its values scaled in the same statement (the tables
are rewritten, under ACCESS EXCLUSIVE locks: migrate a large database in a quiet window).
SQLite: each value is scaled, then each table is rebuilt with its columns' new types (Django's
own rebuild of a changed column). Going back divides again.

The SQL is written out here, frozen like the rest of a migration; `tests/db/test_domains.py`
compares the database's domains with `agents.db.domains`.
"""

from decimal import Decimal

from django.db import migrations, models

import agents.db.domains

SCALE = 1_000_000

# table -> [(column, model, of the domain `lw_money`, null)]
COLUMNS = {
    "agents_task": [("cost_spent", "task", True, False), ("cost_reserved", "task", True, False)],
    "agents_agentday": [("spent", "agentday", True, False), ("reserved", "agentday", True, False)],
    "agents_modelcall": [
        ("reserved_cost", "modelcall", False, False), ("cost", "modelcall", False, True),
    ],
    "agents_limitprofile": [("max_cost", "limitprofile", False, False)],
    "agents_agent": [("daily_cost_cap", "agent", False, True)],
    "agents_modelprice": [
        ("input_per_million", "modelprice", False, False),
        ("output_per_million", "modelprice", False, False),
    ],
    "agents_dailyrollup": [("cost", "dailyrollup", False, False)],
}  # fmt: skip


def _postgresql(apps, schema_editor, *, to_micros: bool) -> None:
    new = "bigint" if to_micros else "numeric(14, 6)"
    quote = schema_editor.quote_name
    schema_editor.execute("ALTER DOMAIN lw_money RENAME TO lw_money_before")
    schema_editor.execute(
        f"CREATE DOMAIN lw_money AS {new} CONSTRAINT lw_money_check CHECK (VALUE >= 0)"
    )
    for table, columns in COLUMNS.items():
        changes = []
        for column, _model, domain, _null in columns:
            name = quote(column)
            scaled = (
                f"round({name} * {SCALE})::bigint" if to_micros else f"{name}::numeric / {SCALE}"
            )
            changes.append(f"ALTER COLUMN {name} TYPE {'lw_money' if domain else new} "
                           f"USING {scaled}")  # fmt: skip
        schema_editor.execute(f"ALTER TABLE {quote(table)} {', '.join(changes)}")
    schema_editor.execute("DROP DOMAIN lw_money_before")


def _sqlite(apps, schema_editor, *, to_micros: bool) -> None:
    """Scale each value; going forward, also rebuild each table as its model now says (Django's
    own rebuild of a changed column), so the columns are declared bigint as in a new database.
    SQLite gives a column declared bigint the affinity of one declared decimal (they differ
    only in a CAST), so going back only divides."""
    quote = schema_editor.quote_name
    for table, columns in COLUMNS.items():
        for column, *_ in columns:
            name = quote(column)
            scaled = (
                f"CAST(ROUND({name} * {SCALE}) AS INTEGER)" if to_micros else f"{name} / {SCALE}.0"
            )
            schema_editor.execute(f"UPDATE {quote(table)} SET {name} = {scaled}")
        if to_micros:
            column, model_name, _domain, null = columns[0]
            model = apps.get_model("agents", model_name)
            before = models.DecimalField(max_digits=14, decimal_places=6, null=null)
            before.set_attributes_from_name(column)
            before.model = model
            schema_editor.alter_field(model, before, model._meta.get_field(column))


def _changed(to_micros: bool):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            _postgresql(apps, schema_editor, to_micros=to_micros)
        else:
            _sqlite(apps, schema_editor, to_micros=to_micros)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0016_domain_checks"),
    ]

    operations = [
        # The fields first (state only): the columns change below, with their values.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="agent",
                    name="daily_cost_cap",
                    field=agents.db.domains.MoneyField(
                        blank=True, decimal_places=6, max_digits=14, null=True
                    ),
                ),
                migrations.AlterField(
                    model_name="dailyrollup",
                    name="cost",
                    field=agents.db.domains.MoneyField(
                        decimal_places=6, default=Decimal("0"), max_digits=14
                    ),
                ),
                migrations.AlterField(
                    model_name="limitprofile",
                    name="max_cost",
                    field=agents.db.domains.MoneyField(
                        decimal_places=6, default=Decimal("5.00"), max_digits=14
                    ),
                ),
                migrations.AlterField(
                    model_name="modelcall",
                    name="cost",
                    field=agents.db.domains.MoneyField(
                        blank=True, decimal_places=6, max_digits=14, null=True
                    ),
                ),
                migrations.AlterField(
                    model_name="modelcall",
                    name="reserved_cost",
                    field=agents.db.domains.MoneyField(
                        decimal_places=6, default=Decimal("0"), max_digits=14
                    ),
                ),
                migrations.AlterField(
                    model_name="modelprice",
                    name="input_per_million",
                    field=agents.db.domains.MoneyField(
                        decimal_places=6, default=Decimal("0"), max_digits=14
                    ),
                ),
                migrations.AlterField(
                    model_name="modelprice",
                    name="output_per_million",
                    field=agents.db.domains.MoneyField(
                        decimal_places=6, default=Decimal("0"), max_digits=14
                    ),
                ),
            ],
        ),
        migrations.RunPython(_changed(to_micros=True), _changed(to_micros=False)),
    ]
