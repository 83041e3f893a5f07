"""One exception handler maps domain and framework errors to the error envelope.

`{"error": {"code": "...", "message": "...", "fields": {...}}}`
"""

from __future__ import annotations

from django import db
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, UnreadablePostError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from agents.errors import AlreadyAnswered, DomainError, error_body

FRAMEWORK_CODES = {
    exceptions.ParseError: "MALFORMED_JSON",
    exceptions.UnsupportedMediaType: "UNSUPPORTED_MEDIA_TYPE",
    exceptions.NotAuthenticated: "UNAUTHENTICATED",
    exceptions.AuthenticationFailed: "UNAUTHENTICATED",
    exceptions.PermissionDenied: "FORBIDDEN",
    exceptions.NotFound: "NOT_FOUND",
    exceptions.MethodNotAllowed: "METHOD_NOT_ALLOWED",
    exceptions.NotAcceptable: "NOT_ACCEPTABLE",
    exceptions.Throttled: "THROTTLED",
}


def _flatten(detail, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            # A nested object's own error ("Expected a JSON object.") is the field's error.
            if prefix and key == "non_field_errors":
                name = prefix
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            out.update(_flatten(value, name))
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            out[prefix or "non_field_errors"] = " ".join(str(item) for item in detail)
        else:
            for index, item in enumerate(detail):
                out.update(_flatten(item, f"{prefix}[{index}]"))
    else:
        out[prefix or "non_field_errors"] = str(detail)
    return out


def body_too_large() -> dict:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE  # set from LOOPWARDEN_MAX_BODY_BYTES
    return error_body(
        "BODY_TOO_LARGE",
        f"The request body is larger than {limit} bytes (LOOPWARDEN_MAX_BODY_BYTES).",
        {"body": f"over {limit} bytes"},
    )


def body_timeout() -> dict:
    return error_body("BODY_TIMEOUT", "The request body did not arrive in full; send it again.")


def _own_code(detail) -> str:
    """The envelope's code for a refused body: a field's own code when it gives one (an
    upper-case one, such as OPERATION_KEY_INVALID), else INVALID_FIELDS."""
    if isinstance(detail, dict):
        details = list(detail.values())
    elif isinstance(detail, list):
        details = detail
    else:
        return detail.code if getattr(detail, "code", "").isupper() else "INVALID_FIELDS"
    for item in details:
        code = _own_code(item)
        if code != "INVALID_FIELDS":
            return code
    return "INVALID_FIELDS"


def _body_error(exc) -> Response | None:
    """Django's own errors while reading the body, in the envelope rather than an HTML page."""
    if isinstance(exc, RequestDataTooBig):
        return Response(body_too_large(), status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, UnreadablePostError):
        # The client declared a body and stalled (the socket's read timeout, see
        # gunicorn.conf.py) or went away: nothing was read, nothing was done.
        return Response(body_timeout(), status=status.HTTP_408_REQUEST_TIMEOUT)
    return None


# Seconds a client is asked to wait when the database did not answer.
DATABASE_RETRY_SECONDS = 2


def exception_handler(exc, context):
    body_error = _body_error(exc)
    if body_error is not None:
        return body_error
    if isinstance(exc, (db.OperationalError, db.InterfaceError)):
        # The database is away (or a lock wait gave up): the envelope an agent's client reads,
        # not Django's HTML page. The transaction was rolled back.
        return Response(
            error_body("DATABASE_UNAVAILABLE", "The database did not answer; send the request "
                       f"again in {DATABASE_RETRY_SECONDS} s."),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(DATABASE_RETRY_SECONDS)},
        )  # fmt: skip
    if isinstance(exc, AlreadyAnswered):  # a repeated request_id: its first answer
        return Response(exc.answer)
    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status)
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        first = next(iter(fields.items()), ("", "invalid"))
        return Response(
            error_body(_own_code(exc.detail), f"Invalid request: {first[0]}: {first[1]}",
                       fields),
            status=status.HTTP_400_BAD_REQUEST,
        )  # fmt: skip
    # Django's own 404 and 403 (DRF's content negotiation raises Http404 for a `format` it
    # does not render) as DRF's, which `drf_handler` answers: their code and message then
    # come from the DRF exception, not from an Http404 without either.
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_handler(exc, context)
    if response is None:
        return None
    code = next((c for k, c in FRAMEWORK_CODES.items() if isinstance(exc, k)), "ERROR")
    detail = getattr(exc, "detail", str(exc))
    response.data = error_body(code, str(detail))
    return response
