"""compose.yaml's health check of the web service, run as written against a real gunicorn
configured as the README says: nginx starts only once it passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from django.db import connection

from tests.live import database_url, gunicorn_server

# Slow (gunicorn processes): `./dev test` leaves it out, CI runs it.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
SECRET = "a-long-random-secret-key-for-this-test-only-0123456789"


def healthcheck(port: int) -> subprocess.CompletedProcess:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    kind, program, *args = compose["services"]["web"]["healthcheck"]["test"]
    assert (kind, program) == ("CMD", "python")
    args = [arg.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for arg in args]
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    "env",
    [
        {},
        # "For a deployment reached over the internet" (README, Docker Compose).
        {"ALLOWED_HOSTS": "lw.example.com", "LOOPWARDEN_REQUIRE_SECRET_KEY": "true",
         "SECRET_KEY": SECRET, "CSRF_TRUSTED_ORIGINS": "https://lw.example.com"},
    ],
    ids=["as_shipped", "internet"],
)  # fmt: skip
def test_the_web_healthcheck_passes_while_the_server_answers_and_fails_once_it_is_gone(env):
    url = database_url(connection.settings_dict)
    with gunicorn_server(database_url=url, workers=1, threads=2, env=env) as server:
        port = urlsplit(server.url).port
        up = healthcheck(port)
    down = healthcheck(port)

    assert up.returncode == 0, up.stderr
    assert down.returncode != 0
