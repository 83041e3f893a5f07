"""Two changes to what PostgreSQL does on every write of a task row (one per decision).

1. The task's agent foreign key loses its own index: the `task_trigger` index (agent,
   trigger_key, created_at) serves every lookup by agent, and a task row's update is never HOT
   (its `updated_at` is indexed), so each index is one more entry written on every decision.
   As in 0010, only the index is dropped; the foreign key constraint stays as it is.

2. The large columns of the rows a decision writes (the task's JSON and text columns, a call's
   arguments and results) are compressed with lz4 instead of pglz where the server has it
   (PostgreSQL 14+ built with lz4, as Debian's, the official images' and the managed services'
   are). A task row outgrows PostgreSQL's 2 kB TOAST threshold once its window holds a few
   calls; every write of the window then tries to compress it. pglz tries long and, on a window
   of digests, fails (the value goes out of line uncompressed), and tries again on the next
   write; lz4 gives up quickly, and where a value does compress it is several times faster both
   ways. Measured with pgbench on the bench's tasks (3.6 kB windows): an UPDATE writing the
   window 280-357 us (pglz) against 189-241 us (lz4), reading the row unchanged. Only the
   compression of values written from now on changes: no table is rewritten, no row is
   read again. A server without lz4 keeps pglz (this migration does nothing there), as does
   SQLite, which has no TOAST.
"""

import django.db.models.deletion
from django.db import migrations, models

TASK_AGENT_INDEX = "agents_task_agent_id_0e7f8ede"

# The compressed columns: model name -> its field names, each a JSON or text column of a row a
# decision writes. Looked up in the migration's model state, so it stays right for the state it
# runs in.
COMPRESSED = {
    "task": ("goal", "reflection", "limits", "initial_limits", "window", "blocked", "pending",
             "signatures", "plans", "milestones", "report"),
    "modelcall": ("tool_calls",),
    "toolcall": ("args", "args_text", "result_data", "result_keys"),
}  # fmt: skip


def lz4_available(connection) -> bool:
    """Whether this PostgreSQL server can compress with lz4 (it lists it as a value of
    `default_toast_compression` only when built with it)."""
    if connection.vendor != "postgresql" or connection.pg_version < 140000:
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        row = cursor.fetchone()
    return bool(row and row[0])


def _set_compression(apps, schema_editor, method: str) -> None:
    connection = schema_editor.connection
    if not lz4_available(connection):
        return
    quote = schema_editor.quote_name
    for model_name, names in COMPRESSED.items():
        model = apps.get_model("agents", model_name)
        columns = ", ".join(
            f"ALTER COLUMN {quote(model._meta.get_field(name).column)} SET COMPRESSION {method}"
            for name in names
        )
        schema_editor.execute(f"ALTER TABLE {quote(model._meta.db_table)} {columns}")


def compress_with_lz4(apps, schema_editor) -> None:
    _set_compression(apps, schema_editor, "lz4")


def compress_as_before(apps, schema_editor) -> None:
    _set_compression(apps, schema_editor, "default")


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0011_agent_day_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="task",
                    name="agent",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="tasks",
                        to="agents.agent",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=f'DROP INDEX IF EXISTS "{TASK_AGENT_INDEX}"',
                    reverse_sql=f'CREATE INDEX "{TASK_AGENT_INDEX}" ON "agents_task" ("agent_id")',
                ),
            ],
        ),
        migrations.RunPython(compress_with_lz4, compress_as_before),
    ]
