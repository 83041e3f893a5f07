"""Each domain of agents 0015 and ledger 0003 gets its check, once every column is of it.

PostgreSQL verifies each check against every value of the domain's columns (a scan of the task,
call, agent day and operation tables, no rewrite); a column changed to a domain that already has
a check would have been rewritten (see agents 0015), hence this separate step, after both.
"""

import importlib

from django.db import migrations

_agents = importlib.import_module("agents.migrations.0015_one_column_rules_as_domains")
_ledger = importlib.import_module("ledger.migrations.0003_one_column_rules_as_domains")


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0015_one_column_rules_as_domains"),
        ("ledger", "0003_one_column_rules_as_domains"),
    ]

    operations = [
        migrations.RunPython(
            *_agents.domain_checks_added(_agents.DOMAINS + _ledger.DOMAINS), elidable=False
        ),
    ]
