"""Issue 13: what the novelty data hash of a tool's results leaves out (tool policy), and what
the trace keeps of each result to say which keys made it new (key digests, novel keys)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0007_similarity_provider_and_labels'),
    ]

    operations = [
        migrations.AddField(
            model_name='toolcall',
            name='novel_keys',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='result_keys',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='toolpolicy',
            name='ignore_result_fields',
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name='toolpolicy',
            name='ignore_volatile_keys',
            field=models.BooleanField(default=True),
        ),
    ]
