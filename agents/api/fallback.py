"""What the API answers for a path none of its routes match: never Django's HTML pages.

A trailing slash is the commonest slip (DRF's routers and many client libraries add one), so
`tasks/` is served exactly like `tasks`: same view, same authentication, same answer. A
redirect would not do: curl and most HTTP clients do not repeat a POST body on a redirect by
default. Anything else under `/api/v1/` answers the JSON error envelope with 404.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt

from agents.errors import error_body


def _match(path: str):
    try:
        return resolve(path)
    except Resolver404:
        return None


@csrf_exempt  # only ever hands the request to a DRF view, which is csrf_exempt itself
def unrouted(request: HttpRequest, path: str = "") -> HttpResponse:
    if request.path_info.endswith("/"):
        match = _match(request.path_info.rstrip("/"))
        if match and match.func is not unrouted and getattr(match.func, "csrf_exempt", False):
            request.resolver_match = match
            return match.func(request, *match.args, **match.kwargs)
    else:
        match = _match(request.path_info + "/")
        if match and match.func is not unrouted and request.method in ("GET", "HEAD"):
            return HttpResponsePermanentRedirect(request.get_full_path(force_append_slash=True))
    return JsonResponse(
        error_body("NOT_FOUND", f"No API endpoint at {request.path}. See docs/API.md."),
        status=404,
    )
