"""The metrics settings are parsed strictly: a bad value stops the start with a clear message."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys

import pytest

from loopwarden.env import ConfigError, env_networks
from tests.live import ROOT

# Slow (Python processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow


def test_allowed_addresses_take_addresses_and_networks(monkeypatch):
    monkeypatch.setenv("METRICS_ALLOWED_ADDRESSES", "127.0.0.1, 10.0.0.0/8,::1")

    assert env_networks("METRICS_ALLOWED_ADDRESSES") == (
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )


def test_allowed_addresses_refuse_what_is_not_an_address(monkeypatch):
    monkeypatch.setenv("METRICS_ALLOWED_ADDRESSES", "127.0.0.1,intranet")

    with pytest.raises(ConfigError, match="'intranet' is not an IP address"):
        env_networks("METRICS_ALLOWED_ADDRESSES")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("METRICS_TOKEN", "short-secret", "METRICS_TOKEN is 12 characters long: use 16 or more"),
        ("METRICS_ALLOWED_ADDRESSES", "10.0.0.0/8,intranet",
         "METRICS_ALLOWED_ADDRESSES: 'intranet' is not an IP address or network"),
    ],
)  # fmt: skip
def test_a_bad_metrics_setting_stops_the_start_with_one_line(tmp_path, name, value, message):
    env = {**os.environ, "LOOPWARDEN_DATA_DIR": str(tmp_path), name: value}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)

    started = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert started.returncode != 0
    lines = started.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], started.stderr
    assert "short-secret" not in started.stderr  # a secret is never printed


def test_gunicorn_with_a_bad_metrics_setting_stops_with_one_line(tmp_path):
    env = {**os.environ, "LOOPWARDEN_DATA_DIR": str(tmp_path), "METRICS_TOKEN": "short-secret"}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [sys.executable, "-m", "gunicorn", "-c", "python:loopwarden.gunicorn_metrics",
               "--bind", "127.0.0.1:0", "loopwarden.wsgi:application"]  # fmt: skip

    started = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=60)  # fmt: skip

    assert started.returncode == 3, started.stderr
    assert started.stderr.strip().splitlines() == [
        "loopwarden: METRICS_TOKEN is 12 characters long: use 16 or more, e.g. "
        "python -c 'import secrets; print(secrets.token_urlsafe(32))'"
    ]


def test_the_metrics_folder_is_under_the_data_dir_by_default(tmp_path):
    env = {**os.environ, "LOOPWARDEN_DATA_DIR": str(tmp_path)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    code = "import os, loopwarden.settings; print(os.environ['PROMETHEUS_MULTIPROC_DIR'])"

    started = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip

    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == str((tmp_path / "prometheus").resolve())
    assert (tmp_path / "prometheus").is_dir()


def test_prometheus_client_imported_before_the_settings_stops_the_start(tmp_path):
    """Each process would count alone and a scrape would show one worker's share: refused."""
    env = {**os.environ, "LOOPWARDEN_DATA_DIR": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "loopwarden.settings"}  # fmt: skip
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    code = "import prometheus_client, django; django.setup()"

    started = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip

    assert started.returncode != 0
    assert "imported before loopwarden.settings set PROMETHEUS_MULTIPROC_DIR" in started.stderr
