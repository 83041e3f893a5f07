"""Fixtures for the background jobs: a model price, the JSON decision log. (An agent's task
with a write in flight, which the ledger's tests share, is in tests/conftest.py.)"""

from __future__ import annotations

from decimal import Decimal

import pytest

from agents.models import ModelPrice


@pytest.fixture
def price(db):
    """100 prompt + 100 completion tokens cost 0.3; a gate without an estimate reserves 200
    tokens (0.4), not the profile's 4,000 (8.00, above the default cost limit)."""
    return ModelPrice.objects.create(
        model="*", input_per_million=Decimal("1000"), output_per_million=Decimal("2000"),
        default_estimate_tokens=200,
    )  # fmt: skip


@pytest.fixture
def json_logs(caplog):
    """The JSON lines of loopwarden's own loggers (they do not propagate to the root)."""
    import json
    import logging

    loggers = [logging.getLogger(name) for name in ("loopwarden.decisions", "loopwarden.jobs")]
    for logger in loggers:
        logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO)

    def lines(event: str | None = None) -> list[dict]:
        parsed = []
        for record in caplog.records:
            if record.name not in ("loopwarden.decisions", "loopwarden.jobs"):
                continue
            line = json.loads(record.getMessage())
            if event is None or line.get("event") == event:
                parsed.append(line)
        return parsed

    yield lines
    for logger in loggers:
        logger.removeHandler(caplog.handler)
