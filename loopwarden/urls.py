from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("api/v1/", include("agents.api.urls")),
    path("django-admin/", admin.site.urls),
    path("", include("console.urls")),
]
