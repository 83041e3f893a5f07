"""A decision's update of its task row made in place (HOT) on PostgreSQL.

PostgreSQL writes a new index entry in every index of a table for each row update, unless no
indexed column changed and the new version fits on the row's page: a HOT update, which writes
no index entry at all. Every decision updates its task row, and every decision changed
`updated_at`, indexed for the console's list (newest activity first); so none was HOT, and
each wrote six index entries (primary key, created_at, updated_at, state and deadline,
profile, trigger) besides the row.

1. The task table keeps 30% of each page free (fillfactor 70): room for the next version of
   a row on it; PostgreSQL prunes the dead ones as it goes. A task row is 1.4-2 kB, a page
   8 kB. (A finished task is not updated again, so its page keeps that room: the table is
   about 1.4 times as large.)
2. `active_minute`, `updated_at` cut to its minute, is a stored column computed by the
   database on every write (so every writer keeps it right, the ORM's or not), and is indexed
   in place of `updated_at`. It changes at most once per minute of a task's activity; the
   console orders by it, then by `updated_at`: the same order as before, with an index.

Measured with `manage.py profile_decisions` (PostgreSQL, 300 rounds, two runs each): 10.1 WAL
records (1,688-1,699 bytes) per decision instead of 16.1 (2,301-2,311), 99% of the task
updates HOT. SQLite has no HOT and no fillfactor; it gets the column and the index.
"""

import agents.models
from django.db import migrations, models

TASK_FILLFACTOR = 70


def _task_table(clause: str):
    """A migration step that alters the task table with `clause`, on PostgreSQL only."""

    def run(apps, schema_editor) -> None:
        if schema_editor.connection.vendor == "postgresql":
            table = schema_editor.quote_name(apps.get_model("agents", "task")._meta.db_table)
            schema_editor.execute(f"ALTER TABLE {table} {clause}")

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0012_task_row_writes"),
    ]

    operations = [
        # First: adding the stored column rewrites the table, which then packs it to the new
        # fillfactor.
        migrations.RunPython(
            _task_table(f"SET (fillfactor = {TASK_FILLFACTOR})"), _task_table("RESET (fillfactor)")
        ),
        migrations.AddField(
            model_name="task",
            name="active_minute",
            field=models.GeneratedField(
                db_persist=True,
                expression=agents.models.MinuteOf("updated_at"),
                output_field=models.DateTimeField(),
            ),
        ),
        migrations.AlterField(
            model_name="task",
            name="updated_at",
            field=models.DateTimeField(auto_now=True),
        ),
        migrations.AddIndex(
            model_name="task",
            index=models.Index(fields=["active_minute"], name="task_activity"),
        ),
    ]
