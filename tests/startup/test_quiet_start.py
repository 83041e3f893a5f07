"""What `./dev run` starts says nothing at start that is not news: the causes of two warnings a
user saw on every start, each checked where it comes from."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest
from kombu import Connection

from loopwarden import broker
from tests.live import ROOT, free_port

# Slow (manage.py, gunicorn and Celery processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow


def test_the_embedded_broker_needs_no_hostname(caplog):
    broker.register()
    with (
        caplog.at_level(logging.WARNING, logger="kombu.connection"),
        Connection("filesystem://") as connection,
    ):
        connection.info()

    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_the_port_check_runs_without_a_runpy_warning():
    result = subprocess.run(
        [sys.executable, "-W", "default", "-m", "loopwarden", "port", "127.0.0.1",
         str(free_port())],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert '"$PY" -m loopwarden port ' in (ROOT / "dev").read_text()
