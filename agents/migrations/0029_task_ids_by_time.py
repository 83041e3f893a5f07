"""New tasks get time-ordered ids (UUID version 7, agents.db.ids): a fresh task's trace rows
go on the right edge of the indexes keyed by task. A default of Python's: nothing changes in
the database, and the tasks already there keep their ids.

State only: on SQLite Django would remake the task table for an altered field, and a remade
table loses the triggers that keep the counts by state (migration 0027).
"""

import agents.db.ids
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0028_masked_search"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="task",
                    name="id",
                    field=models.UUIDField(
                        default=agents.db.ids.uuid7,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
