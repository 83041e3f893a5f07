"""Counts of tasks by state kept by the database (`TaskStateDelta`), so the dashboard's and
the metrics' counts do not read every task.

Triggers on the task table append a row per change: on PostgreSQL one row a state for an
INSERT or DELETE statement (its transition table grouped, so the growth bench's bulk inserts
add a few rows, not one per task) and, for an UPDATE that changes a task's state, -1 for the
old and +1 for the new (a row trigger whose WHEN is checked in the executor: a decision that
leaves the state alone runs no trigger). On SQLite, row triggers. Created with the counts of the
tasks already there, in the same transaction that creates the triggers (which locks out writes
to the task table until it commits), so nothing is counted twice or missed.

On SQLite, Django remakes a table to alter it and drops its triggers: a later migration that
alters agents_task must create these again (tests/console/test_state_counts.py fails if not).
"""

from django.db import migrations, models

PG_FUNCTIONS = """
CREATE OR REPLACE FUNCTION lw_task_states_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agents_taskstatedelta (state, n)
    SELECT state, count(*) FROM lw_new_tasks GROUP BY state;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION lw_task_states_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agents_taskstatedelta (state, n)
    SELECT state, -count(*) FROM lw_old_tasks GROUP BY state;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION lw_task_state_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agents_taskstatedelta (state, n) VALUES (OLD.state, -1), (NEW.state, 1);
    RETURN NULL;
END $$;
CREATE TRIGGER task_states_added AFTER INSERT ON agents_task
    REFERENCING NEW TABLE AS lw_new_tasks FOR EACH STATEMENT
    EXECUTE FUNCTION lw_task_states_added();
CREATE TRIGGER task_states_removed AFTER DELETE ON agents_task
    REFERENCING OLD TABLE AS lw_old_tasks FOR EACH STATEMENT
    EXECUTE FUNCTION lw_task_states_removed();
CREATE TRIGGER task_state_changed AFTER UPDATE OF state ON agents_task
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION lw_task_state_changed();
"""

PG_DROP = """
DROP TRIGGER IF EXISTS task_states_added ON agents_task;
DROP TRIGGER IF EXISTS task_states_removed ON agents_task;
DROP TRIGGER IF EXISTS task_state_changed ON agents_task;
DROP FUNCTION IF EXISTS lw_task_states_added();
DROP FUNCTION IF EXISTS lw_task_states_removed();
DROP FUNCTION IF EXISTS lw_task_state_changed();
"""

SQLITE_TRIGGERS = [
    "CREATE TRIGGER task_states_added AFTER INSERT ON agents_task FOR EACH ROW BEGIN "
    "INSERT INTO agents_taskstatedelta (state, n) VALUES (NEW.state, 1); END",
    "CREATE TRIGGER task_states_removed AFTER DELETE ON agents_task FOR EACH ROW BEGIN "
    "INSERT INTO agents_taskstatedelta (state, n) VALUES (OLD.state, -1); END",
    "CREATE TRIGGER task_state_changed AFTER UPDATE OF state ON agents_task FOR EACH ROW "
    "WHEN OLD.state IS NOT NEW.state BEGIN "
    "INSERT INTO agents_taskstatedelta (state, n) VALUES (OLD.state, -1); "
    "INSERT INTO agents_taskstatedelta (state, n) VALUES (NEW.state, 1); END",
]

NAMES = ("task_states_added", "task_states_removed", "task_state_changed")


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # Writes to the task table wait from here to the commit: the counts below are exact.
        schema_editor.execute("LOCK TABLE agents_task IN SHARE ROW EXCLUSIVE MODE")
        schema_editor.execute(PG_FUNCTIONS)
    else:
        for sql in SQLITE_TRIGGERS:
            schema_editor.execute(sql)
    schema_editor.execute(
        "INSERT INTO agents_taskstatedelta (state, n) "
        "SELECT state, count(*) FROM agents_task GROUP BY state"
    )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_DROP)
    else:
        for name in NAMES:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0026_i44_semantic_provider"),
    ]

    operations = [
        migrations.CreateModel(
            name="TaskStateDelta",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("state", models.CharField(max_length=12)),
                ("n", models.BigIntegerField()),
            ],
        ),
        migrations.RunPython(create, drop, elidable=False),
    ]
