"""Fixtures for the metrics tests: /metrics switched on with a token, and a scraper."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.metrics.exposition import TOKEN, Exposition, parse


@pytest.fixture
def metrics_token(settings) -> str:
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_ADDRESSES = ()
    return TOKEN


@pytest.fixture
def scrape(client, metrics_token) -> Callable[[], Exposition]:
    """Scrape /metrics through the test client, as Prometheus with the token would.

    Counters live in this test process's files and keep what earlier tests counted, so tests
    compare two scrapes; the database gauges start from this test's rows.
    """

    def get() -> Exposition:
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {metrics_token}")
        assert response.status_code == 200, response.content[:300]
        return parse(response.content.decode())

    return get
