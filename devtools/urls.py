"""Routed by loopwarden/urls.py under /api/v1/_bench/ only when this app is installed.

The floor writes trace rows on the caller's task whatever its state (it decides nothing), so it
is routed only in the server `manage.py bench` starts (LOOPWARDEN_BENCH=true), not in `./dev
run`'s, where the developer tools are on too."""

from __future__ import annotations

from django.urls import path

from devtools.server import Baseline, Floor
from loopwarden.env import env_bool

urlpatterns = [path("baseline", Baseline.as_view(), name="devtools-bench-baseline")]
if env_bool("LOOPWARDEN_BENCH", False):
    urlpatterns.append(path("floor", Floor.as_view(), name="devtools-bench-floor"))
