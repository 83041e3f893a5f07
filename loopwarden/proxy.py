"""The client's address, as the deployment's proxies report it.

Behind TRUSTED_PROXIES proxies, each of which appends the address it received the request from
to X-Forwarded-For, the client is the entry that many places from the right: whatever a client
writes into the header itself sits further left and is ignored, so it cannot pick the address
its failed sign-ins are counted against.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR", "")
    proxies = settings.TRUSTED_PROXIES
    if not proxies:
        return remote
    forwarded = [
        part.strip()
        for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
        if part.strip()
    ]
    if len(forwarded) < proxies:  # not through all the proxies: the nearest hop is all we know
        return forwarded[0] if forwarded else remote
    return forwarded[-proxies]
