"""The project's URLs with the bench's routes in front, as the bench's server has them."""

from django.urls import include, path

from loopwarden.urls import urlpatterns as project

urlpatterns = [path("api/v1/_bench/", include("devtools.urls")), *project]
