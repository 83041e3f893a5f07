"""The production switch: `check --deploy` is clean under it, and its settings parse strictly.

Each test starts `manage.py` in a subprocess with a production environment of its own, because
the settings are read once, from the environment, when Django starts.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

# Slow (manage.py and gunicorn processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """Run manage.py with a production environment: nothing inherited but PATH and HOME."""
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "loopwarden.example.com",
        "CSRF_TRUSTED_ORIGINS": "https://loopwarden.example.com",
        "LOOPWARDEN_DATA_DIR": str(tmp_path / "var"),
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def warnings_in(output: str) -> list[str]:
    """The lines of a system check report that name a check (`(app.W001)`, `(security.W004)`).

    Every one counts, drf-spectacular's schema warnings (operationId collisions) included."""
    return [line for line in output.splitlines() if re.search(r"\(\w+\.[WEC]\d+\)", line)]


@pytest.mark.parametrize(
    "switch",
    [{"LOOPWARDEN_HTTPS": "true"}, {"LOOPWARDEN_REQUIRE_SECRET_KEY": "true"}],
    ids=["https", "implied-by-require-secret-key"],
)
def test_check_deploy_prints_no_warning_under_the_production_switch(tmp_path, switch):
    result = manage(tmp_path, "check", "--deploy", **switch)
    assert result.returncode == 0, result.stderr
    assert warnings_in(result.stdout + result.stderr) == []


def test_without_the_switch_check_deploy_does_warn(tmp_path):
    # The test above could only pass by the switch: the same environment without it warns.
    result = manage(tmp_path, "check", "--deploy")
    found = " ".join(warnings_in(result.stdout + result.stderr))
    assert "security.W004" in found and "security.W008" in found


def test_the_switch_can_be_turned_off_explicitly(tmp_path):
    result = manage(
        tmp_path,
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings as s; "
        "print(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS)",
        LOOPWARDEN_REQUIRE_SECRET_KEY="true",
        LOOPWARDEN_HTTPS="false",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "0"]


def test_under_the_switch_the_proxy_header_marks_requests_secure(tmp_path):
    code = (
        "from django.test import Client; "
        "c = Client(); "
        "plain = c.get('/login/', HTTP_HOST='loopwarden.example.com'); "
        "tls = c.get('/login/', HTTP_HOST='loopwarden.example.com', "
        "HTTP_X_FORWARDED_PROTO='https'); "
        "print(plain.status_code, plain.get('Location'), tls.status_code, "
        "tls.get('Strict-Transport-Security'))"
    )
    result = manage(tmp_path, "shell", "--no-imports", "-c", code, LOOPWARDEN_HTTPS="true")
    assert result.returncode == 0, result.stderr
    plain_status, location, tls_status, *hsts = result.stdout.split(maxsplit=3)
    assert (plain_status, location) == ("301", "https://loopwarden.example.com/login/")
    assert tls_status == "200"
    assert hsts[0].startswith("max-age=31536000")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("LOOPWARDEN_HTTPS", "maybe", "LOOPWARDEN_HTTPS='maybe' is not a boolean"),
        ("HSTS_SECONDS", "a year", "HSTS_SECONDS='a year' is not an integer"),
    ],
)
def test_a_bad_value_stops_the_start_with_a_clear_message(tmp_path, name, value, message):
    result = manage(tmp_path, "check", **{name: value})
    assert result.returncode != 0
    assert message in result.stderr


def test_under_the_switch_prometheus_scrapes_a_web_machine_over_plain_http(tmp_path):
    """The README's scrape config reaches each web machine directly, inside the network, over
    HTTP: the switch's redirect to HTTPS would send the scraper to a port that speaks none."""
    token = secrets.token_urlsafe(24)
    code = (
        "from django.test import Client; "
        f"r = Client().get('/metrics', HTTP_HOST='web-1.internal:8000', "
        f"HTTP_AUTHORIZATION='Bearer {token}'); "
        "print(r.status_code, r.get('Location'))"
    )
    result = manage(
        tmp_path, "shell", "--no-imports", "-c", code, LOOPWARDEN_HTTPS="true",
        METRICS_TOKEN=token, ALLOWED_HOSTS="loopwarden.example.com,web-1.internal",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["200", "None"]
