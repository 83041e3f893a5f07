"""The built-in `novelty` limit profile, for agents that have no verifier of their own.

Framework adapters given no evidence callback send each result's `data_hash`; under this
profile a result never seen in the task counts as progress, so a normal agent runs to the end
while identical results still trip no_progress. `create_agent NAME --profile novelty` names it.
Only created if missing: an admin's own `novelty` profile is left as it is.
"""

from django.db import migrations

DESCRIPTION = "for agents without a verifier (framework adapters): new result data is progress"


def create_novelty_profile(apps, schema_editor):
    LimitProfile = apps.get_model("agents", "LimitProfile")
    LimitProfile.objects.get_or_create(
        name="novelty", defaults={"progress_mode": "novelty", "description": DESCRIPTION}
    )


def keep_profile(apps, schema_editor):
    # Tasks copied its limits; removing the row would change nothing for them, but an agent's
    # default profile would silently fall back. Leave it.
    pass


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0005_issue8_guard_holes"),
    ]

    operations = [
        migrations.RunPython(create_novelty_profile, keep_profile),
    ]
