"""The claiming call named by (task, claim_seq) instead of a tool_call id: a claim is then
written in one statement, before the call row that it names is inserted (issue 11)."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def claim_seq_from_tool_call(apps, schema_editor):
    Operation = apps.get_model("ledger", "Operation")
    ToolCall = apps.get_model("agents", "ToolCall")
    Operation.objects.exclude(tool_call=None).update(
        claim_seq=Subquery(ToolCall.objects.filter(pk=OuterRef("tool_call_id")).values("seq")[:1])
    )


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0009_catalog_version"),
        ("ledger", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="operation",
            name="claim_seq",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(claim_seq_from_tool_call, migrations.RunPython.noop),
        migrations.RemoveField(model_name="operation", name="tool_call"),
        # No column: a ForeignObject lives in the model state only (and the schema editor
        # cannot remove one on SQLite, so it never sees it).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="operation",
                    name="tool_call",
                    field=models.ForeignObject(
                        from_fields=("task", "claim_seq"),
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="agents.toolcall",
                        to_fields=("task", "seq"),
                    ),
                ),
            ]
        ),
    ]
