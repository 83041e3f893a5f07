"""The guard core, the services and the ledger type-check: mypy with django-stubs, configured in
pyproject.toml (`[tool.mypy]`), runs as part of the suite so CI fails on a type error."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from tests.live import ROOT

# Slow (mypy processes; CI runs mypy itself too): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow


def mypy(*args: str) -> subprocess.CompletedProcess:
    # The cache under .mypy_cache keeps a run with nothing changed well under a second.
    return subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_the_checked_packages_have_no_type_errors():
    result = mypy()
    assert result.returncode == 0, f"mypy failed:\n{result.stdout}{result.stderr}"


def test_mypy_checks_the_guard_the_services_and_the_ledger():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert {"agents/guard", "agents/services", "ledger"} <= set(config["files"])
    assert "mypy_django_plugin.main" in config["plugins"]


def test_a_type_error_fails_the_check(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text('count: int = "three"\n')
    result = mypy(str(wrong))
    assert result.returncode == 1, result.stdout
    assert "[assignment]" in result.stdout
