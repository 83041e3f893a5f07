"""GET /metrics: the Prometheus exposition, for scrapers that prove who they are.

Protected by METRICS_TOKEN (`Authorization: Bearer <token>`), by METRICS_ALLOWED_ADDRESSES
(the client's REMOTE_ADDR, never a forwarded header a client could write), or both; with
neither set the endpoint does not exist (404), so metrics are never public by accident.
Not under /api/v1/: this is for monitoring, not for agents or operators, and its token is
none of theirs.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from agents import metrics


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    token, networks = settings.METRICS_TOKEN, settings.METRICS_ALLOWED_ADDRESSES
    if not token and not networks:
        raise Http404("Metrics are off: set METRICS_TOKEN or METRICS_ALLOWED_ADDRESSES.")
    if networks and not _address_allowed(request.META.get("REMOTE_ADDR", ""), networks):
        return HttpResponse("Address not allowed.\n", status=403, content_type="text/plain")
    if token and not _bearer_matches(request.headers.get("Authorization", ""), token):
        response = HttpResponse("Bearer token required.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(metrics.registry()), content_type=CONTENT_TYPE_LATEST)


def _address_allowed(address: str, networks) -> bool:
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(client in network for network in networks)


def _bearer_matches(header: str, token: str) -> bool:
    scheme, _, given = header.partition(" ")
    # Compared in constant time: the answer's timing tells nothing about the token.
    matches = hmac.compare_digest(given.strip().encode(), token.encode())
    return scheme.lower() == "bearer" and matches
