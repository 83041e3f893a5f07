"""The project's URLs with the bench's floor in front, as the bench's own server routes it."""

from django.urls import path

from devtools.server import Floor
from loopwarden.urls import urlpatterns as project

urlpatterns = [path("api/v1/_bench/floor", Floor.as_view()), *project]
