"""Startup and configuration errors are one clear line on stderr, with the fix, and a non-zero
exit: never a traceback. Each case runs `manage.py` (or `./dev run`) in a subprocess, as a user
would, with a bad environment."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.live import ROOT, free_port

# Slow (manage.py and ./dev run processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow


@pytest.fixture
def clean_env(tmp_path):
    """The test run's environment without the settings a user would not have set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))}
    for name in ("DATABASE_URL", "DEBUG", "PORT", "CELERY_BROKER_URL", "SECRET_KEY"):
        env.pop(name, None)
    env["LOOPWARDEN_DATA_DIR"] = str(tmp_path / "data")
    env["PYTHONWARNINGS"] = "ignore"
    return env


def manage(env: dict, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env={**env, **extra}, cwd=tempfile.gettempdir(), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def one_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_a_malformed_database_url_is_one_line_with_the_fix(clean_env):
    line = one_line(manage(clean_env, "migrate", DATABASE_URL="not-a-url"))

    assert "DATABASE_URL" in line and "postgres://" in line


def test_a_malformed_database_url_never_prints_its_password(clean_env):
    line = one_line(manage(clean_env, "check", DATABASE_URL="postgres://u:s3cret@db:port/x"))

    assert "s3cret" not in line and "DATABASE_URL" in line


def test_a_database_url_without_a_database_name_is_one_line(clean_env):
    line = one_line(manage(clean_env, "migrate", DATABASE_URL="postgres:///"))

    assert "names no database" in line and "/dbname" in line


def test_an_unsupported_database_engine_is_one_line(clean_env):
    line = one_line(manage(clean_env, "check", DATABASE_URL="mysql://u@localhost/db"))

    assert "DATABASE_URL" in line and "PostgreSQL" in line


def test_a_bad_boolean_is_one_line(clean_env):
    line = one_line(manage(clean_env, "check", DEBUG="maybe"))

    assert "DEBUG" in line and "true/false" in line


def test_a_currency_that_is_not_a_code_is_one_line(clean_env):
    line = one_line(manage(clean_env, "check", LOOPWARDEN_CURRENCY="dollars"))

    assert "LOOPWARDEN_CURRENCY" in line and "three-letter" in line


def test_an_unreachable_postgresql_is_one_line_with_the_fix(clean_env):
    port = free_port()  # nothing listens there
    url = f"postgres://loopwarden:s3cret@127.0.0.1:{port}/loopwarden"

    line = one_line(manage(clean_env, "migrate", DATABASE_URL=url))

    assert f"127.0.0.1:{port}" in line
    assert "DATABASE_URL" in line
    assert "s3cret" not in line  # the password is never printed


def _postgres_answers() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _postgres_answers(), reason="no PostgreSQL on 127.0.0.1:5432")
def test_a_missing_postgresql_database_says_how_to_create_it(clean_env):
    url = "postgres://postgres@127.0.0.1:5432/loopwarden_no_such_database"

    line = one_line(manage(clean_env, "migrate", DATABASE_URL=url))

    assert "createdb" in line and "loopwarden_no_such_database" in line


def test_a_working_command_is_untouched(clean_env):
    result = manage(clean_env, "check")

    assert result.returncode == 0, result.stderr
    assert "no issues" in result.stdout


def dev_run(env: dict, **extra: str) -> subprocess.CompletedProcess:
    venv = Path(sys.executable).parent.parent
    return subprocess.run(
        [str(ROOT / "dev"), "run"], env={**env, "LOOPWARDEN_VENV": str(venv), **extra},
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_dev_run_on_a_busy_port_says_so_before_any_banner(clean_env):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        result = dev_run(clean_env, PORT=str(port))

    line = one_line(result)
    assert f"port {port}" in line and "PORT=" in line
    assert "Loopwarden: http" not in result.stdout


def test_dev_run_refuses_a_port_that_is_not_a_number(clean_env):
    line = one_line(dev_run(clean_env, PORT="eighty"))

    assert "PORT" in line


def test_dev_run_with_an_unreachable_database_is_one_line(clean_env):
    port = free_port()

    result = dev_run(clean_env, PORT=str(free_port()),
                     DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/loopwarden")  # fmt: skip

    line = one_line(result)
    assert "cannot connect to the database" in line and "Loopwarden: http" not in result.stdout


def _python_without_django() -> str | None:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if Path(candidate).exists():
            probe = subprocess.run([candidate, "-c", "import django"], capture_output=True)
            if probe.returncode != 0:
                return candidate
    return None


@pytest.mark.skipif(_python_without_django() is None, reason="every python here has Django")
def test_manage_py_outside_the_virtualenv_says_which_python_to_use(clean_env):
    result = subprocess.run(
        [_python_without_django(), str(ROOT / "manage.py"), "create_agent", "demo"],
        env=clean_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    line = one_line(result)
    assert ".venv/bin/python manage.py" in line


def test_a_log_level_is_read_in_any_case_and_an_unknown_one_is_one_line(clean_env):
    assert manage(clean_env, "check", LOG_LEVEL="info").returncode == 0

    line = one_line(manage(clean_env, "check", LOG_LEVEL="verbose"))

    assert "LOG_LEVEL" in line and "WARNING" in line


def test_a_bad_connection_age_names_itself_not_the_database_url(clean_env):
    line = one_line(manage(clean_env, "check", DB_CONN_MAX_AGE="abc"))

    assert "DB_CONN_MAX_AGE" in line and "not a database URL" not in line


def test_requiring_a_secret_key_holds_under_debug_too(clean_env):
    line = one_line(manage(clean_env, "check", DEBUG="true", LOOPWARDEN_REQUIRE_SECRET_KEY="true"))

    assert "SECRET_KEY" in line


def celery(env: dict, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "celery", "-A", "loopwarden", *args],
        env={**env, **extra}, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("program", ["worker", "beat"])
def test_a_bad_value_stops_a_celery_worker_or_beat_with_one_line(clean_env, program):
    line = one_line(celery(clean_env, program, "--loglevel=WARNING", DEBUG="maybe"))

    assert "DEBUG" in line and "true/false" in line


def test_a_bad_value_stops_gunicorn_with_one_line(clean_env):
    result = subprocess.run(
        [str(Path(sys.executable).with_name("gunicorn")), "loopwarden.wsgi", "--check-config",
         "-b", f"127.0.0.1:{free_port()}"],
        env={**clean_env, "WEB_THREADS": "0"}, cwd=ROOT, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip

    line = one_line(result)
    assert "WEB_THREADS" in line


def test_a_command_on_a_database_never_migrated_says_to_migrate(clean_env):
    line = one_line(manage(clean_env, "create_agent", "demo"))

    assert "manage.py migrate" in line and "loopwarden.sqlite3" in line


@pytest.mark.skipif(not _postgres_answers(), reason="no PostgreSQL on 127.0.0.1:5432")
def test_a_command_on_an_empty_postgresql_database_says_to_migrate(clean_env):
    name = f"lw_unmigrated_{os.getpid()}"
    admin = "postgres://postgres@127.0.0.1:5432/postgres"
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True)
    try:
        url = f"postgres://postgres@127.0.0.1:5432/{name}"
        line = one_line(manage(clean_env, "prune", "--dry-run", "--days=30", DATABASE_URL=url))
    finally:
        subprocess.run(["psql", admin, "-qc", f"DROP DATABASE {name}"], check=True)

    assert "manage.py migrate" in line and name in line


def test_the_generated_secret_key_is_readable_by_its_owner_only(clean_env):
    assert manage(clean_env, "check").returncode == 0

    key_file = Path(clean_env["LOOPWARDEN_DATA_DIR"]) / "secret_key"
    assert len(key_file.read_text().strip()) >= 50
    assert key_file.stat().st_mode & 0o077 == 0, oct(key_file.stat().st_mode)


@pytest.mark.parametrize("program", ["manage", "worker"])
def test_a_broker_url_of_no_known_transport_is_one_line_without_its_password(clean_env, program):
    url = "reddis://:s3cret@127.0.0.1:6379/0"  # a typo of redis
    if program == "manage":
        result = manage(clean_env, "check", CELERY_BROKER_URL=url)
    else:
        result = celery(clean_env, "worker", "-Q", "lw_no_queue", CELERY_BROKER_URL=url)

    line = one_line(result)
    assert "CELERY_BROKER_URL" in line and "redis://" in line
    assert "s3cret" not in line


def test_a_bad_cache_url_is_one_line_without_its_password(clean_env):
    line = one_line(manage(clean_env, "check", CACHE_URL="memcache://ops:s3cret@cache:11211"))

    assert "CACHE_URL" in line and "redis://" in line
    assert "s3cret" not in line


@pytest.mark.parametrize("name", ["NOTIFY_WEBHOOK_URL", "LOOPWARDEN_EMBEDDINGS_URL", "SITE_URL"])
def test_a_url_setting_without_http_is_one_line_that_never_shows_it(clean_env, name):
    line = one_line(manage(clean_env, "check", **{name: "hooks.example.com/T0/s3cret"}))

    assert name in line and "https://" in line
    assert "s3cret" not in line


def test_an_email_setting_without_an_address_is_one_line(clean_env):
    line = one_line(manage(clean_env, "check", NOTIFY_EMAILS="ops@example.com,oncall"))

    assert "NOTIFY_EMAILS" in line and "'oncall'" in line
    named = manage(clean_env, "check", NOTIFY_EMAILS="Ops <ops@example.com>,b@example.org")
    assert named.returncode == 0, named.stderr  # a name with the address, as Django mails it


@pytest.mark.parametrize("name", ["LOOPWARDEN_DATA_DIR", "PROMETHEUS_MULTIPROC_DIR"])
def test_a_folder_setting_that_cannot_be_a_folder_is_one_line(clean_env, tmp_path, name):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")

    line = one_line(manage(clean_env, "check", **{name: str(a_file)}))

    assert name in line and str(a_file) in line
