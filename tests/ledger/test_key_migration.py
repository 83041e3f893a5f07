"""Ledger 0004 stores each operation key in its NFC form, unless that form is already another
row's key in the namespace (a look-alike executed before keys were compared in NFC: both rows
stay, and the NFC one is the key's from now on)."""

from __future__ import annotations

import unicodedata

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from ledger.models import Operation

pytestmark = pytest.mark.django_db(transaction=True)

# The ledger before 0004, beside the newest agents state (the task rows it creates must match
# the agents table as migrated).
LEDGER_BEFORE = ("ledger", "0003_one_column_rules_as_domains")
NFC = unicodedata.normalize("NFC", "pay-café-1")
NFD = unicodedata.normalize("NFD", NFC)


def test_stored_keys_become_their_nfc_form_unless_that_key_is_taken():
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    before = [LEDGER_BEFORE, *(node for node in leaves if node[0] == "agents")]
    executor.migrate(before)
    try:
        apps = MigrationExecutor(connection).loader.project_state(before).apps
        agent = apps.get_model("agents", "Agent").objects.create(name="a", namespace="ns")
        task = apps.get_model("agents", "Task").objects.create(
            agent=agent, goal="g", limits={}, deadline_at=timezone.now()
        )
        held = apps.get_model("ledger", "Operation").objects
        for namespace, key in [("ns", NFD), ("other", NFD), ("other", NFC), ("ns", "plain-1")]:
            held.create(
                namespace=namespace, operation_key=key, tool="pay", fingerprint="f",
                state="COMMITTED", task=task, claimed_at=timezone.now(),
            )  # fmt: skip

        MigrationExecutor(connection).migrate(leaves)

        keys = sorted(Operation.objects.values_list("namespace", "operation_key"))
        assert keys == sorted([("ns", NFC), ("other", NFD), ("other", NFC), ("ns", "plain-1")])
    finally:
        MigrationExecutor(connection).migrate(leaves)
