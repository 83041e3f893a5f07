from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from loopwarden.metrics_endpoint import metrics_view

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", include("agents.api.urls")),
    path("django-admin/", admin.site.urls),
    path("", include("console.urls")),
]
