"""A `.env` file is read by django-environ into the settings of every program; a variable set in
the environment wins over the file. Each case runs `manage.py` in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopwarden import env as env_module
from tests.live import ROOT
from tests.startup.test_config_errors import clean_env, manage, one_line  # noqa: F401

# Slow (manage.py processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

PRINT_SETTINGS = (
    "from django.conf import settings; "
    "print(settings.SITE_URL, settings.LOG_LEVEL, settings.ALLOWED_HOSTS, sep='|')"
)


@pytest.fixture
def env_file(tmp_path):
    path = tmp_path / "loopwarden.env"
    path.write_text(
        "# a comment line\n"
        "SITE_URL=https://from-the-file.example\n"
        "export LOG_LEVEL='error'\n"
        'ALLOWED_HOSTS="file.example,other.example"\n'
    )
    return path


def settings_seen(env: dict, **extra: str) -> list[str]:
    result = manage(env, "shell", "-c", PRINT_SETTINGS, **extra)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1].split("|")  # after the shell's own line


def test_the_files_values_reach_the_settings(clean_env, env_file):  # noqa: F811
    site_url, log_level, hosts = settings_seen(clean_env, LOOPWARDEN_ENV_FILE=str(env_file))

    assert site_url == "https://from-the-file.example"
    assert log_level == "ERROR"
    assert hosts == "['file.example', 'other.example']"


def test_the_environment_wins_over_the_file(clean_env, env_file):  # noqa: F811
    site_url, log_level, _ = settings_seen(
        clean_env, LOOPWARDEN_ENV_FILE=str(env_file), SITE_URL="https://from-the-environment"
    )

    assert site_url == "https://from-the-environment"
    assert log_level == "ERROR"  # the file still gives what the environment does not


def test_without_a_file_the_defaults_hold(clean_env, tmp_path):  # noqa: F811
    empty = tmp_path / "empty.env"
    empty.write_text("")

    site_url, log_level, _ = settings_seen(clean_env, LOOPWARDEN_ENV_FILE=str(empty))

    assert (site_url, log_level) == ("http://127.0.0.1:8000", "INFO")


def test_a_bad_value_in_the_file_is_one_line_with_the_fix(clean_env, tmp_path):  # noqa: F811
    path = tmp_path / "bad.env"
    path.write_text("DEBUG=maybe\n")

    line = one_line(manage(clean_env, "check", LOOPWARDEN_ENV_FILE=str(path)))

    assert "DEBUG" in line and "true/false" in line


def test_a_named_file_that_does_not_exist_is_one_line(clean_env, tmp_path):  # noqa: F811
    line = one_line(manage(clean_env, "check", LOOPWARDEN_ENV_FILE=str(tmp_path / "nope.env")))

    assert "LOOPWARDEN_ENV_FILE" in line and "not a file" in line


def test_the_default_file_is_the_repository_roots(monkeypatch, tmp_path):
    monkeypatch.delenv("LOOPWARDEN_ENV_FILE", raising=False)
    monkeypatch.setattr(env_module, "ROOT", tmp_path)
    assert env_module.env_file() is None

    (tmp_path / ".env").write_text("X=1\n")

    assert env_module.env_file() == tmp_path / ".env"
    assert env_module.ROOT.name != "loopwarden"  # the repository, not the package folder


def test_the_repository_root_is_where_manage_py_is():
    assert (env_module.ROOT / "manage.py").is_file() and env_module.ROOT == ROOT


def test_dev_run_reads_its_own_variables_from_the_file(clean_env, tmp_path):  # noqa: F811
    path = tmp_path / "dev.env"
    path.write_text("PORT=8123\nLOOPWARDEN_SIMULATOR=false\nSITE_URL=x\n")
    env = {**clean_env, "LOOPWARDEN_ENV_FILE": str(path)}
    env.pop("LOOPWARDEN_SIMULATOR", None)

    exports = subprocess.run(
        [sys.executable, "-m", "loopwarden", "env", "PORT", "LOOPWARDEN_SIMULATOR"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    overridden = subprocess.run(
        [sys.executable, "-m", "loopwarden", "env", "PORT"],
        env={**env, "PORT": "9000"}, cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert exports.stdout == "export PORT=8123\nexport LOOPWARDEN_SIMULATOR=false\n"
    assert overridden.returncode == 0 and overridden.stdout == ""


def test_the_example_file_reads_as_the_defaults(clean_env):  # noqa: F811
    """`.env.example` copied as is to `.env` starts, and changes no default it documents."""
    site_url, log_level, hosts = settings_seen(
        clean_env, LOOPWARDEN_ENV_FILE=str(ROOT / ".env.example")
    )

    assert (site_url, log_level) == ("http://127.0.0.1:8000", "INFO")
    assert hosts == "['localhost', '127.0.0.1']"


def test_dev_reset_finds_the_data_folder_the_file_names(clean_env, tmp_path):  # noqa: F811
    data = tmp_path / "from-the-file"
    data.mkdir()
    (data / "simulator.log").write_text("a line\n")
    path = tmp_path / "dev.env"
    path.write_text(f"LOOPWARDEN_DATA_DIR={data}\n")
    env = {**clean_env, "LOOPWARDEN_ENV_FILE": str(path)}
    env.pop("LOOPWARDEN_DATA_DIR")
    env["LOOPWARDEN_VENV"] = str(Path(sys.executable).parent.parent)

    result = subprocess.run(
        [str(ROOT / "dev"), "reset"], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"removed {data}/simulator.log"
    assert not (data / "simulator.log").exists()


def test_a_relative_data_dir_is_the_repositorys_wherever_it_starts(clean_env, tmp_path):  # noqa: F811
    """`.env.example` says LOOPWARDEN_DATA_DIR=./var, the default's place: a manage.py,
    gunicorn or Celery started from another folder must find the same database."""
    path = tmp_path / "relative.env"
    relative = os.path.relpath(tmp_path / "data", ROOT)
    path.write_text(f"LOOPWARDEN_DATA_DIR={relative}\n")
    env = {k: v for k, v in clean_env.items() if k != "LOOPWARDEN_DATA_DIR"}
    shown = (
        "from django.conf import settings; "
        "print(settings.DATA_DIR, settings.DATABASES['default']['NAME'], sep='|')"
    )

    elsewhere = tmp_path / "a" / "folder" / "elsewhere"
    elsewhere.mkdir(parents=True)

    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", shown],
        env={**env, "LOOPWARDEN_ENV_FILE": str(path)}, cwd=elsewhere, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    data_dir, database = result.stdout.strip().splitlines()[-1].split("|")
    assert data_dir == str(tmp_path / "data")
    assert database == str(tmp_path / "data" / "loopwarden.sqlite3")


@pytest.mark.parametrize("line", ["LOG_LEVEL = error", "SITE_URL: https://x.example"])
def test_a_line_the_file_cannot_be_read_by_is_one_line_not_a_default(clean_env, tmp_path, line):  # noqa: F811
    path = tmp_path / "spaced.env"
    path.write_text(f"# fine\nDEBUG=false\n{line}\nSECRET_KEY = s3cret-value-never-shown\n")

    shown = one_line(manage(clean_env, "check", LOOPWARDEN_ENV_FILE=str(path)))

    assert "line 3" in shown and line.split()[0].rstrip(":") in shown and "NAME=value" in shown
    assert "s3cret" not in shown
