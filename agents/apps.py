from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db.models.signals import post_migrate


def _after_migrate(sender, **kwargs) -> None:
    # Permissions exist only after post_migrate of every app, hence a signal, not a migration.
    from agents.models import LimitProfile
    from agents.roles import ensure_groups

    ensure_groups()
    LimitProfile.objects.get_or_create(
        name="default", defaults={"description": "The documented defaults (docs/API.md, limits)"}
    )


class AgentsConfig(AppConfig):
    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from axes.signals import user_locked_out

        from agents.services.signin import record_lockout

        post_migrate.connect(_after_migrate, sender=self)
        from django.db.backends.signals import connection_created

        from agents.db.timestamps import fast_timestamps

        # PostgreSQL timestamps parsed in C (Django's loader parses them in Python).
        connection_created.connect(fast_timestamps, dispatch_uid="agents.db.timestamps")
        from agents.services import catalog

        # A changed price or tool policy is seen by every worker at its next decision.
        catalog.connect()
        # A sign-in lockout goes in the audit log (django-axes decides it).
        user_locked_out.connect(record_lockout, dispatch_uid="loopwarden-signin-lockout")
        from agents import semantic

        # The meaning model's int8 graph takes 3 s of CPU to build: kept for later processes.
        semantic.KEEP_BUILT_IN = settings.DATA_DIR / "models"
        from agents import metrics  # imports models: only once the app registry is ready

        # Starts the clock of the decision latency histogram at every request's arrival.
        request_started.connect(metrics.request_arrived, dispatch_uid="loopwarden.metrics")
        request_finished.connect(metrics.request_done, dispatch_uid="loopwarden.metrics")
        # Connects the enqueue of a stop's notification (`stops.notification_due`): every
        # process that can stop a task, not only the Celery worker, needs the receiver.
        from agents import jobs  # noqa: F401
