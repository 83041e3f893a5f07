"""Site-wide request checks that must run before any view or query sees the request.

Each refusal here is the API's error envelope on `/api/` paths and a line of plain text
elsewhere (the console's pages), with one log line at most and never a traceback.
"""

from __future__ import annotations

import io
import json
import logging
import re

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.log import log_response

from agents.api.errors import body_timeout, body_too_large
from agents.db import storable
from agents.errors import error_body

_security_log = logging.getLogger("django.security.DisallowedHost")


def _refusal(
    request: HttpRequest, status: int, envelope: dict, *, close: bool = False
) -> HttpResponse:
    """The envelope on /api/, its message as plain text elsewhere.

    `close`: for a request whose body's end is unknown. The answer is streamed, so of no
    declared length, which makes Django's server close the connection after it: the rest of
    the body is never read as a request of its own.
    """
    if request.path.startswith("/api/"):
        content, content_type = json.dumps(envelope), "application/json"
    else:
        content, content_type = envelope["error"]["message"], "text/plain; charset=utf-8"
    if close:
        return StreamingHttpResponse([content], status=status, content_type=content_type)
    return HttpResponse(content, status=status, content_type=content_type)


class RefuseDisallowedHostMiddleware:
    """A `Host` not in ALLOWED_HOSTS answers 400 here, before anything asks for the host.

    Django raises DisallowedHost wherever the host is first read (the HTTPS redirect, the
    trailing-slash check, CSRF, an absolute `next` link) and answers its HTML 400 page after
    logging the exception with its traceback. Here it is asked once, first: one warning line on
    `django.security.DisallowedHost`, the same logger Django uses.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            request.get_host()
        except DisallowedHost as exc:
            response = _refusal(
                request, 400, error_body("DISALLOWED_HOST", str(exc), {"host": "not allowed"})
            )
            # One line, no traceback; marks the answer logged, so django.request adds none.
            log_response(str(exc), response=response, request=request, logger=_security_log)
            return response
        return self.get_response(request)


def _chunked(request: HttpRequest) -> bool:
    codings = request.META.get("HTTP_TRANSFER_ENCODING", "")
    return "chunked" in codings.lower()


_LENGTH = re.compile(r"[0-9]+")


class BodyFramingMiddleware:
    """A body is read to its end as its sender framed it, or the request is refused.

    Chunked (`Transfer-Encoding: chunked`): Django reads a body by its Content-Length alone,
    and a chunked body has none: it would be taken as empty (a finish without its evidence, a
    task without its goal). A server that ends its input where the chunks end says so
    (`wsgi.input_terminated`, as gunicorn does): the body is read here, up to
    LOOPWARDEN_MAX_BODY_BYTES (413 past it), and handed on with its length. Django's own
    server does not: 411 LENGTH_REQUIRED.

    A Content-Length that is not a count of bytes (`-5`, `1e3`) is refused 400: Django would
    read an empty body. gunicorn refuses both before the application runs; Django's server
    passes them on.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = request.META.get("CONTENT_LENGTH")
        if length and not _LENGTH.fullmatch(length):
            message = f"Content-Length {length[:40]!r} is not a count of bytes."
            return _refusal(request, 400, error_body("BAD_REQUEST", message), close=True)
        if not _chunked(request) or not isinstance(request, WSGIRequest):
            return self.get_response(request)  # an ASGI server hands over the whole body
        if not request.META.get("wsgi.input_terminated"):
            message = "This server does not read chunked bodies: send a Content-Length."
            return _refusal(request, 411, error_body("LENGTH_REQUIRED", message), close=True)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        try:
            body = request.META["wsgi.input"].read(limit + 1)
        except OSError:  # the socket's read timeout, or the client went away
            return _refusal(request, 408, body_timeout())
        except Exception as exc:  # the server's own word on malformed chunks (gunicorn's)
            message = f"The chunked body is malformed: {exc}"
            return _refusal(request, 400, error_body("MALFORMED_BODY", message[:300]))
        if len(body) > limit:
            return _refusal(request, 413, body_too_large())
        environ = {**request.environ, "CONTENT_LENGTH": str(len(body))}
        environ["wsgi.input"] = io.BytesIO(body)
        del environ["HTTP_TRANSFER_ENCODING"]
        return self.get_response(WSGIRequest(environ))


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
        return _refusal(request, 400, error_body("UNSUPPORTED_TEXT", message, {where: what}))

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
