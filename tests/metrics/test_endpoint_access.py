"""Who may scrape /metrics: the token's holder, allowed addresses, nobody when unconfigured."""

from __future__ import annotations

import ipaddress

import pytest

from tests.metrics.exposition import TOKEN, parse

pytestmark = pytest.mark.django_db


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def test_it_does_not_exist_until_a_token_or_addresses_are_set(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_ADDRESSES = ()

    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", **bearer(TOKEN)).status_code == 404


def test_it_refuses_a_scrape_without_the_token(client, metrics_token):
    response = client.get("/metrics")

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"loopwarden_" not in response.content


@pytest.mark.parametrize(
    "header",
    [f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, "Bearer "],
)
def test_it_refuses_a_wrong_token_or_scheme(client, metrics_token, header):
    response = client.get("/metrics", HTTP_AUTHORIZATION=header)

    assert response.status_code == 401
    assert b"loopwarden_" not in response.content


def test_an_agent_or_operator_token_is_not_the_metrics_token(
    client, metrics_token, agent_api, operator_api
):
    for caller in (agent_api, operator_api):
        assert client.get("/metrics", **bearer(caller.token)).status_code == 401


def test_it_serves_the_prometheus_text_format_with_the_token(client, metrics_token):
    response = client.get("/metrics", **bearer(TOKEN))

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    assert "no-cache" in response["Cache-Control"]
    names = parse(response.content.decode()).names()
    assert {"loopwarden_tasks", "loopwarden_operations_waiting", "loopwarden_spend_today",
            "loopwarden_database_up"} <= names  # fmt: skip


def test_it_answers_only_get(client, metrics_token):
    assert client.post("/metrics", **bearer(TOKEN)).status_code == 405


def test_allowed_addresses_alone_let_those_clients_scrape_without_a_token(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_ADDRESSES = (ipaddress.ip_network("10.0.0.0/8"),)

    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="not-an-address").status_code == 403


def test_a_forwarded_header_does_not_make_an_address_allowed(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_ADDRESSES = (ipaddress.ip_network("10.0.0.0/8"),)

    response = client.get("/metrics", REMOTE_ADDR="192.0.2.7", HTTP_X_FORWARDED_FOR="10.1.2.3")

    assert response.status_code == 403


def test_with_both_set_a_scrape_needs_both(client, settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_ADDRESSES = (ipaddress.ip_network("127.0.0.1/32"),)

    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", **bearer(TOKEN)).status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7", **bearer(TOKEN)).status_code == 403
