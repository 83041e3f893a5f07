"""Site-wide request checks that must run before any view or query sees the request."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from agents import storable
from agents.api.errors import error_body


class RefuseUnstorableUrlMiddleware:
    """A path or query string holding text the database cannot store answers 400.

    `%00` decodes to NUL, which PostgreSQL refuses in any query parameter: a filter
    (`tasks?agent=%00`) or a lookup by name (`profiles/a%00b`) would be a 500. It can name
    nothing stored, so it is refused here, once, for the API (the error envelope) and the
    console alike. JSON bodies are checked by the API's parser (`agents.api.parsers`).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        found = self._unstorable(request)
        if found is None:
            return self.get_response(request)
        where, what = found
        message = f"{where} holds {what}, which the database cannot store."
        if request.path.startswith("/api/"):
            return JsonResponse(error_body("UNSUPPORTED_TEXT", message, {where: what}), status=400)
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")

    @staticmethod
    def _unstorable(request: HttpRequest) -> tuple[str, str] | None:
        what = storable.unstorable(request.path)
        if what is not None:
            return "path", what
        for key, values in request.GET.lists():
            for text in (key, *values):
                what = storable.unstorable(text)
                if what is not None:
                    return f"query.{storable.printable(key)}", what
        return None
