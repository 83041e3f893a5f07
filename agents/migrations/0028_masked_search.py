"""The console's search reads a task's goal and external_ref as an operator sees them.

`Task.masked_search` holds both, masked, for the tasks whose goal or external_ref holds a
secret (null for the rest); the search matches it instead of the raw text, which would let
anyone who may search read a secret one character at a time. The tasks already there are
filled in batches by id (the goal and external_ref never change after creation). On
PostgreSQL a partial trigram index serves the search of the few masked rows, as the goal's
and external_ref's serve the rest (migration 0025); built CONCURRENTLY.
"""

from django.db import migrations, models

from agents.redaction import masked_search_text

BATCH = 2000


def fill(apps, schema_editor):
    Task = apps.get_model("agents", "Task")
    last = None
    while True:
        page = Task.objects.order_by("pk").only("pk", "goal", "external_ref")
        if last is not None:
            page = page.filter(pk__gt=last)
        rows = list(page[:BATCH])
        if not rows:
            break
        last = rows[-1].pk
        for task in rows:
            masked = masked_search_text(task.goal, task.external_ref)
            if masked is not None:
                Task.objects.filter(pk=task.pk).update(masked_search=masked)


def index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS task_masked_trgm ON agents_task USING gin "
        "(UPPER(masked_search) gin_trgm_ops) WHERE masked_search IS NOT NULL"
    )


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS task_masked_trgm")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("agents", "0027_i43_task_state_counts"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="masked_search",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=False),
        migrations.RunPython(index, drop_index, elidable=False),
    ]
