"""Demo data for the embedded default: profiles, prices, an admin, a looping demo agent."""

from __future__ import annotations

import os
from decimal import Decimal
from io import StringIO
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from agents.models import Agent, LimitProfile, ModelPrice, ToolPolicy

PROFILES = {
    "default": {"description": "The documented defaults (docs/API.md, limits)"},
    "patient": {
        "description": "for agents that verify little: more steps without progress",
        "max_stagnant": 10,
    },
    "strict": {
        "description": "small budgets, stop on the first repeat",
        "max_model_calls": 8,
        "max_tool_executions": 8,
        "repeat_action": "stop",
        "max_cost": Decimal("0.50"),
    },
}


class Command(BaseCommand):
    help = "Create demo profiles, prices, an admin (admin/admin) and the demo agent's token file."

    def add_arguments(self, parser):
        parser.add_argument(
            "--token-file", default=str(Path(settings.DATA_DIR) / "demo-agent.token")
        )
        parser.add_argument("--admin-password", default="admin")

    def handle(self, *args, token_file, admin_password, **options):
        for name, fields in PROFILES.items():
            LimitProfile.objects.update_or_create(name=name, defaults=fields)
        ModelPrice.objects.get_or_create(
            model="*", defaults={"input_per_million": Decimal("3.00"),
                                 "output_per_million": Decimal("15.00")},
        )  # fmt: skip
        ToolPolicy.objects.get_or_create(
            tool="web_search", defaults={"ignore_fields": ["request_id", "trace.span"]}
        )
        call_command("create_operator", "admin", password=admin_password, admin=True,
                     stdout=StringIO())  # fmt: skip
        call_command("create_operator", "operator", password="operator",
                     stdout=StringIO())  # fmt: skip
        path = Path(token_file)
        if not path.exists() or not Agent.objects.filter(name="demo-agent").exists():
            out = StringIO()
            call_command("create_agent", "demo-agent", namespace="demo", stdout=out)
            # Readable by its owner only from the first byte (simulate reads it; `ps` never
            # shows the token, and neither should a world-readable file).
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as token_file:
                token_file.write(out.getvalue().strip().splitlines()[-1] + "\n")
            path.chmod(0o600)
        # The demo scenarios name the demo profiles; an agent may only use granted ones.
        Agent.objects.get(name="demo-agent").allowed_profiles.add(
            *LimitProfile.objects.filter(name__in=PROFILES)
        )
        self.stdout.write(
            "demo data ready: sign in as admin/admin (or operator/operator); "
            f"demo agent token in {path}"
        )
