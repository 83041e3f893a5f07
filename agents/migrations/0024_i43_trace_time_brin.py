"""Block-range (BRIN) indexes on the trace's creation time, PostgreSQL only.

The trace is appended in time order, so a BRIN index finds a day's calls (the rollup job) by
reading a few block ranges, where the tables had no index on the time and were read whole
(a year of history: issue 43). A BRIN index is a few pages, and an insert into a range not yet
summarized writes nothing to it, where a B-tree on the column would take an entry per call. Built CONCURRENTLY, so a live database keeps taking decisions while it is built.
"""

from django.db import migrations

INDEXES = {
    "trace_mc_created_brin": "agents_modelcall",
    "trace_tc_created_brin": "agents_toolcall",
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, table in INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} USING brin (created_at) "
            "WITH (autosummarize = on)"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("agents", "0023_i43_trace_pruned"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
