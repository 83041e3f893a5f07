"""An operation's counts and state take their rules from PostgreSQL domains, as the task's do.

See `agents/migrations/0015_one_column_rules_as_domains.py`: a table's CHECK constraints are
planned again by every statement that writes the table, a domain's once per connection. The
operation's counts are of `lw_count` (created by that migration), its state of
`lw_operation_state`; `operation_state_valid` and the counts' `>= 0` checks are dropped. No
table is rewritten: the domains get their checks in agents 0016, after every column changed
to them. On SQLite the rules are the columns' CHECKs.
"""

import importlib

from django.db import migrations

import agents.db.domains

# The helpers of the agents migration that made the task's rules domains (frozen with it).
_agents = importlib.import_module("agents.migrations.0015_one_column_rules_as_domains")

DOMAINS = [
    (
        "lw_operation_state",
        "varchar(14)",
        "VALUE IN ('IN_FLIGHT', 'COMMITTED', 'UNKNOWN', 'NOT_COMMITTED')",
    ),
]
COUNTS = {"ledger_operation": ["attempts", "claim_seq", "reconcile_checks"]}


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0015_one_column_rules_as_domains"),
        ("ledger", "0002_claim_seq"),
    ]

    operations = [
        migrations.RunPython(*_agents.domains_created(DOMAINS), elidable=False),
        migrations.RunPython(*_agents.count_checks_dropped(COUNTS), elidable=False),
        migrations.RemoveConstraint(
            model_name="operation",
            name="operation_state_valid",
        ),
        migrations.AlterField(
            model_name="operation",
            name="attempts",
            field=agents.db.domains.Count(default=1),
        ),
        migrations.AlterField(
            model_name="operation",
            name="claim_seq",
            field=agents.db.domains.Count(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="operation",
            name="reconcile_checks",
            field=agents.db.domains.Count(default=0),
        ),
        migrations.AlterField(
            model_name="operation",
            name="state",
            field=agents.db.domains.OperationState(
                choices=[
                    ("IN_FLIGHT", "IN_FLIGHT"),
                    ("COMMITTED", "COMMITTED"),
                    ("UNKNOWN", "UNKNOWN"),
                    ("NOT_COMMITTED", "NOT_COMMITTED"),
                ],
                max_length=14,
            ),
        ),
    ]
