"""The task foreign keys of model and tool calls, and the agent foreign key of agent days, lose
their own index: the unique (task, seq) and (agent, day) indexes serve every lookup by that
column, and one index fewer is one write fewer on every gate and tool request.

Only the index is dropped (the foreign key constraints stay as they are): Django's own
AlterField would drop and re-create each constraint, checking every row again under a lock.
"""

import django.db.models.deletion
from django.db import migrations, models

# (table, column, the index Django named when it created the column)
INDEXES = [
    ("agents_agentday", "agent_id", "agents_agentday_agent_id_c854f29e"),
    ("agents_modelcall", "task_id", "agents_modelcall_task_id_8d3282f8"),
    ("agents_toolcall", "task_id", "agents_toolcall_task_id_539520f9"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0009_catalog_version"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="agentday",
                    name="agent",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="days",
                        to="agents.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="modelcall",
                    name="task",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="model_call_rows",
                        to="agents.task",
                    ),
                ),
                migrations.AlterField(
                    model_name="toolcall",
                    name="task",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tool_call_rows",
                        to="agents.task",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=f'DROP INDEX IF EXISTS "{index}"',
                    reverse_sql=f'CREATE INDEX "{index}" ON "{table}" ("{column}")',
                )
                for table, column, index in INDEXES
            ],
        ),
    ]
