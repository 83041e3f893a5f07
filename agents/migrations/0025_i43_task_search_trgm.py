"""Trigram indexes for the console's search of a task's goal and external_ref, PostgreSQL only.

The search matches any part of either text, any case (`icontains`: `UPPER(col) LIKE
UPPER('%words%')`), which no B-tree serves: every search read every task. A GIN index of the
same expression with `gin_trgm_ops` (the `pg_trgm` extension, shipped with PostgreSQL) answers
it from the index for any text of 3 characters or more. Written when a task is created (the
goal and external_ref never change), never by a decision. Built CONCURRENTLY. The database
role needs the right to create the extension (PostgreSQL 13+: the database's owner may) or an
administrator creates it first.
"""

from django.db import migrations

INDEXES = {
    "task_goal_trgm": "UPPER(goal::text) gin_trgm_ops",
    "task_ref_trgm": "UPPER(external_ref::text) gin_trgm_ops",
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, expression in INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON agents_task USING gin ({expression})"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("agents", "0024_i43_trace_time_brin"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
