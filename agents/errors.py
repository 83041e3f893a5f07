"""Domain errors raised by services. One exception handler maps them to HTTP; console views
show them next to the form field or as a message."""

from __future__ import annotations


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    """The error envelope of every refusal: `{"error": {"code", "message", "fields"}}`."""
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


class DomainError(Exception):
    status = 400
    code = "BAD_REQUEST"

    def __init__(self, message: str, *, code: str | None = None, fields: dict | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.fields = fields or {}


class BadInput(DomainError):
    status = 400
    code = "BAD_INPUT"


class NotFound(DomainError):
    status = 404
    code = "NOT_FOUND"


class Forbidden(DomainError):
    status = 403
    code = "FORBIDDEN"


class Conflict(DomainError):
    status = 409
    code = "CONFLICT"


class TriggerLoop(DomainError):
    status = 429
    code = "TRIGGER_LOOP"


class AlreadyAnswered(Exception):
    """A decision request repeated under its `request_id`: `answer` is the answer it got the
    first time (kept with the task), answered again with nothing counted. Not an error: the
    API answers it 200."""

    def __init__(self, answer: dict):
        super().__init__("already answered")
        self.answer = answer
