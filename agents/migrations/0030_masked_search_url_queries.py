"""`Task.masked_search` again for the tasks whose goal or external_ref the redaction policy now
masks differently: a secret in a URL's query (`?api_key=...`), or in an assignment given as a
value (`url=https://x/export?token=...`), was shown and searchable as it was. Only a text with
`=` in it can hold one; those tasks are read in batches by id, and a row is written only where
the masked text changed.
"""

from django.db import migrations
from django.db.models import Q

from agents.redaction import masked_search_text

BATCH = 2000


def refill(apps, schema_editor):
    Task = apps.get_model("agents", "Task")
    candidates = Task.objects.filter(Q(goal__contains="=") | Q(external_ref__contains="="))
    after = None
    while True:
        batch = candidates.order_by("pk").values_list("pk", "goal", "external_ref", "masked_search")
        rows = list((batch if after is None else batch.filter(pk__gt=after))[:BATCH])
        if not rows:
            return
        after = rows[-1][0]
        for pk, goal, external_ref, before in rows:
            now = masked_search_text(goal, external_ref)
            if now != before:
                Task.objects.filter(pk=pk).update(masked_search=now)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0029_task_ids_by_time"),
    ]

    operations = [
        migrations.RunPython(refill, migrations.RunPython.noop, elidable=False),
    ]
