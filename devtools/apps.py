from __future__ import annotations

from django.apps import AppConfig


class DevtoolsConfig(AppConfig):
    name = "devtools"
    verbose_name = "Loopwarden developer tools"
