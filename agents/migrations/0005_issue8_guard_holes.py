"""Issue 8: token reservations, default estimates, allowed profiles, the grant bound's original
limits, released executions, seen hashes in their own table, per-tool redaction fields."""

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


def forward(apps, schema_editor):
    """Copy each task's seen hashes into the new table and its limits as its original limits."""
    Task = apps.get_model("agents", "Task")
    SeenHash = apps.get_model("agents", "SeenHash")
    for task in Task.objects.only("id", "limits", "seen_hashes").iterator():
        rows = [SeenHash(task_id=task.pk, hash=h) for h in dict.fromkeys(task.seen_hashes or [])]
        SeenHash.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
        Task.objects.filter(pk=task.pk).update(initial_limits=task.limits)


def backward(apps, schema_editor):
    Task = apps.get_model("agents", "Task")
    SeenHash = apps.get_model("agents", "SeenHash")
    for task in Task.objects.only("id").iterator():
        hashes = list(
            SeenHash.objects.filter(task_id=task.pk).order_by("id").values_list("hash", flat=True)
        )
        Task.objects.filter(pk=task.pk).update(seen_hashes=hashes)


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0004_task_pending'),
    ]

    operations = [
        migrations.AddField(
            model_name='agent',
            name='allowed_profiles',
            field=models.ManyToManyField(blank=True, related_name='granted_agents', to='agents.limitprofile'),
        ),
        migrations.AddField(
            model_name='limitprofile',
            name='default_estimate_tokens',
            field=models.PositiveIntegerField(default=4000, help_text="Tokens a model-call gate reserves when it carries no estimate and the model's price row has no default.", validators=[django.core.validators.MinValueValidator(1)]),
        ),
        migrations.AddField(
            model_name='modelcall',
            name='reserved_tokens',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='modelprice',
            name='default_estimate_tokens',
            field=models.PositiveIntegerField(blank=True, help_text="Tokens a gate for this model reserves when it carries no estimate; empty: the task profile's default.", null=True, validators=[django.core.validators.MinValueValidator(1)]),
        ),
        migrations.AddField(
            model_name='task',
            name='initial_limits',
            field=models.JSONField(default=dict),
        ),
        migrations.AddField(
            model_name='task',
            name='tokens_reserved',
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='released_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='toolpolicy',
            name='redact_fields',
            field=models.JSONField(blank=True, default=list, help_text="Key names masked in this tool's args and results in the console and the operator API (case and separators ignored), on top of the built-in policy."),
        ),
        migrations.CreateModel(
            name='SeenHash',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('hash', models.CharField(max_length=128)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('task', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='seen_hash_rows', to='agents.task')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('task', 'hash'), name='seen_hash_unique_per_task')],
            },
        ),
        migrations.RunPython(forward, backward),
        migrations.RemoveField(
            model_name='task',
            name='seen_hashes',
        ),
    ]
