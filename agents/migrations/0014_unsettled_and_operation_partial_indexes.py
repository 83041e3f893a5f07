"""Two indexes of the call tables hold only the rows they are read for (partial indexes).

1. `mc_unsettled`, the reservation sweep's, was on (decision, settled_at, created_at) of every
   model call ever made: the largest index of the table (2.4 MB for 39,000 calls in a bench
   database, against 0.9 MB for the primary key), and a usage report, which sets
   `settled_at`, wrote an entry in it on every call. Now on `created_at` of the calls the sweep
   looks for, allowed and neither settled nor charged (`agents.models.UNSETTLED`): a gate
   writes its entry, the usage report that settles the call writes none, and the index holds
   the calls in flight (and, until a vacuum clears them, the entries of calls settled since).
2. A tool call's operation is indexed only where it has one (a write with an operation key):
   a read, most of the requests, writes no entry. Only the index changes: the foreign key
   constraint stays as it is (Django's own AlterField would drop and re-create it, checking
   every row again under a lock; see migration 0010).

Every lookup the indexes served still finds them: the sweep's candidates (`agents.selectors.
unsettled_reservations`) and the tool calls of an operation (an equality on `operation_id`,
which implies it is set). Measured with `manage.py profile_decisions` (PostgreSQL, 300 rounds,
two runs each): 9.7 WAL records (1,643-1,646 bytes) per decision instead of 10.1
(1,686-1,687). SQLite has partial indexes too.
"""

import django.db.models.deletion
from django.db import migrations, models

OPERATION_INDEX = "agents_toolcall_operation_id_5a5cf83d"  # Django's name for the column's index


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0013_task_hot_updates"),
        ("ledger", "0002_claim_seq"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="modelcall", name="mc_unsettled"),
        migrations.AddIndex(
            model_name="modelcall",
            index=models.Index(
                condition=models.Q(("decision", "ALLOW"), ("expired", False), ("settled_at", None)),
                fields=["created_at"],
                name="mc_unsettled",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="toolcall",
                    name="operation",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="tool_calls",
                        to="ledger.operation",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=f'DROP INDEX IF EXISTS "{OPERATION_INDEX}"',
                    reverse_sql=f'CREATE INDEX "{OPERATION_INDEX}" ON "agents_toolcall" '
                    '("operation_id")',
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="toolcall",
            index=models.Index(
                condition=models.Q(("operation__isnull", False)),
                fields=["operation"],
                name="tool_call_operation",
            ),
        ),
    ]
