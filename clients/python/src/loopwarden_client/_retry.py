"""The client's retry policy, in one place: what is sent again, after how long, how many times.

The flows (`_flows.send_flow`, `_flows.tool_flow`) ask it and keep no rule of their own, the way
stripe-python keeps its retries in one class. Nothing here is public API.
"""

from __future__ import annotations

import email.utils
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import httpx

from loopwarden_client._core import Request, error_from_response

# Refusals made before anything was decided, so sending the request again is safe: (status, code).
# OPERATION_CONTENDED: racing claims of one operation key did not settle, each try rolled back.
# Any other 429 (`TRIGGER_LOOP`: the guard's verdict on a looping workflow) is an answer.
RESENDABLE = frozenset(
    {(429, "THROTTLED"), (503, "DATABASE_UNAVAILABLE"), (409, "OPERATION_CONTENDED")}
)
RESENDABLE_STATUSES = frozenset(status for status, _ in RESENDABLE)  # the body is read for these
# A gateway's own page (a proxy before a backend that restarts, or answers too slowly): no
# envelope, so nothing says whether the backend decided. Sent again as a lost answer is.
GATEWAY_STATUSES = frozenset({502, 503, 504})
# A connection that could not be made: the request never reached the server, so sending it
# again is safe whatever it is (a server restarting, a load balancer between two backends).
UNSENT = (httpx.ConnectError, httpx.ConnectTimeout)


@dataclass(frozen=True)
class RetryPolicy:
    """When a request is sent again, and a WAIT asked again.

    `max_tries` sends of one request in all: a refusal in `RESENDABLE` is sent again after its
    Retry-After (`default_wait_seconds` without one; one longer than `max_throttle_seconds` is
    raised), a connection never made after `first_reconnect_seconds`, doubling. A decision
    carries a `request_id` of its own, the same on every send, so one whose answer was lost
    (a read timeout, a dropped connection, a proxy's 502, 503 or 504 page) is sent again too:
    the server answers the repeat with the first answer and counts nothing. Any other
    request's lost answer is raised.
    A WAIT is asked again after the server's `retry_after_ms`, doubling up to
    `max_wait_seconds`, up to the session's `max_wait_tries` asks.
    """

    max_tries: int = 5
    first_reconnect_seconds: float = 0.5
    default_wait_seconds: float = 1.0
    max_throttle_seconds: float = 60.0
    max_wait_seconds: float = 15.0

    def identified(self, request: Request) -> Request:
        """A decision with a `request_id` of its own (a new one for every send flow, so a
        second ask after a WAIT is a request of its own); any other request as it is."""
        if not request.decision or "request_id" in (request.body or {}):
            return request
        return replace(request, body={**(request.body or {}), "request_id": uuid.uuid4().hex})

    def after_refusal(
        self, response: httpx.Response, tries: int, request: Request | None = None
    ) -> float | None:
        """Seconds to wait before sending a refused request again, or None to read the answer
        (an error then raises as a `LoopwardenError`). A gateway's page without the API's
        envelope answering a decision is a lost answer (see `after_lost`)."""
        status = response.status_code
        resendable = status in RESENDABLE_STATUSES or status in GATEWAY_STATUSES
        if not resendable or tries >= self.max_tries:
            return None
        code = error_from_response(response).code
        if status in GATEWAY_STATUSES and code == f"HTTP_{status}":
            if request is not None and request.decision:
                return self.first_reconnect_seconds * 2 ** (tries - 1)
            return None
        if (status, code) not in RESENDABLE:
            return None
        delay = retry_after_seconds(response.headers.get("Retry-After"))
        if delay is None:
            delay = self.default_wait_seconds
        return delay if delay <= self.max_throttle_seconds else None

    def after_lost(self, error: httpx.TransportError, request: Request, tries: int) -> float | None:
        """Seconds to wait before sending again a request whose answer never came, or None to
        raise `error`: only a request that never left, or a decision (its `request_id`)."""
        if tries >= self.max_tries or not (isinstance(error, UNSENT) or request.decision):
            return None
        return self.first_reconnect_seconds * 2 ** (tries - 1)

    def before_asking_again(
        self, retry_after_ms: int | None, tries: int, max_tries: int
    ) -> float | None:
        """Seconds to sleep out the `tries`-th WAIT before asking again, or None to give up."""
        if tries >= max_tries:
            return None
        least = (retry_after_ms or self.default_wait_seconds * 1000) / 1000
        return max(least, min(least * 2 ** (tries - 1), self.max_wait_seconds))


DEFAULT_RETRY = RetryPolicy()


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header (delta-seconds or an HTTP date) in seconds, or None if unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
