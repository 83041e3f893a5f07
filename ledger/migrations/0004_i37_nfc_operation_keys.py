"""Operation keys are compared in Unicode NFC (`agents.guard.keys`): each stored key takes its
NFC form, so a request naming the key in either spelling finds its row.

A key whose NFC form is already another row's key in the namespace is left as it is: a
look-alike that executed again before keys were compared in NFC. Both rows stay (the ledger
keeps what was done); the one already in NFC is the key's from now on. Going back changes nothing (the spelling each row was claimed under is not kept).
"""

import unicodedata

from django.db import migrations


def keys_in_nfc(apps, schema_editor):
    Operation = apps.get_model("ledger", "Operation")
    rows = Operation.objects.values_list("pk", "namespace", "operation_key").order_by("pk")
    for pk, namespace, key in rows.iterator(chunk_size=2000):
        if unicodedata.is_normalized("NFC", key):
            continue
        nfc = unicodedata.normalize("NFC", key)
        # (A key NFC makes longer than its column keeps its spelling too.)
        if len(nfc) > 300 or Operation.objects.filter(namespace=namespace, operation_key=nfc).exists():
            continue
        Operation.objects.filter(pk=pk).update(operation_key=nfc)


class Migration(migrations.Migration):
    dependencies = [
        ("ledger", "0003_one_column_rules_as_domains"),
    ]

    operations = [
        migrations.RunPython(keys_in_nfc, migrations.RunPython.noop, elidable=True),
    ]
