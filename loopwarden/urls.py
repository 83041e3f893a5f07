from __future__ import annotations

from django.apps import apps
from django.conf import settings
from django.contrib import admin
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path, re_path

from agents.api.fallback import unrouted
from console.forms import AdminSignInForm
from loopwarden.metrics_endpoint import metrics_view

# The admin's sign-in form checks the username's length like the console's (console.forms).
admin.site.login_form = AdminSignInForm

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", include("agents.api.urls")),
    # Any other path under /api answers the API's JSON 404 too, never the console's page.
    re_path(r"^api(?:/.*)?$", unrouted),
    path("django-admin/", admin.site.urls),
    path("", include("console.urls")),
]

# Developer tools (LOOPWARDEN_DEVTOOLS=true): the bench's baseline endpoint. First, since the
# API's own list ends in a catch-all; production (the app not installed) has no such route.
if apps.is_installed("devtools"):
    urlpatterns.insert(0, path("api/v1/_bench/", include("devtools.urls")))

# `./dev run` serves with gunicorn, which has no static file handler of its own: under DEBUG the
# console's CSS and scripts come from the staticfiles finders (no collectstatic needed). Without
# DEBUG the list is empty and console/urls.py serves them (a proxy may serve STATIC_ROOT first).
if settings.DEBUG:
    urlpatterns += staticfiles_urlpatterns()
