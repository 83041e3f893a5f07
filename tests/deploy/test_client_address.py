"""The address sign-in failures are counted against: REMOTE_ADDR, or behind TRUSTED_PROXIES
proxies the X-Forwarded-For entry the nearest proxies vouch for, never one the client wrote."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from loopwarden.proxy import client_address


def request(forwarded: str | None = None):
    extra = {"REMOTE_ADDR": "10.0.0.1"}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return RequestFactory().get("/login/", **extra)


def test_without_proxies_it_is_the_peer_whatever_the_header_says(settings):
    settings.TRUSTED_PROXIES = 0
    assert client_address(request("6.6.6.6")) == "10.0.0.1"


@pytest.mark.parametrize(
    ("proxies", "forwarded", "address"),
    [
        (1, "203.0.113.9", "203.0.113.9"),
        (1, "6.6.6.6, 203.0.113.9", "203.0.113.9"),  # the client wrote 6.6.6.6 itself
        (2, "6.6.6.6, 203.0.113.9, 10.1.1.1", "203.0.113.9"),
        (1, "", "10.0.0.1"),
    ],
)
def test_behind_proxies_it_is_the_entry_they_appended(settings, proxies, forwarded, address):
    settings.TRUSTED_PROXIES = proxies
    assert client_address(request(forwarded)) == address
