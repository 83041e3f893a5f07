"""Routed by loopwarden/urls.py under /api/v1/_bench/ only when this app is installed."""

from __future__ import annotations

from django.urls import path

from devtools.server import Baseline, Floor

urlpatterns = [
    path("baseline", Baseline.as_view(), name="devtools-bench-baseline"),
    path("floor", Floor.as_view(), name="devtools-bench-floor"),
]
