"""Developer tools stay out of production: without LOOPWARDEN_DEVTOOLS the settings do not
install the `devtools` app, so the bench's baseline URL answers 404 and `manage.py bench` (and
`simulate`, `seed_demo`, `measure_render`) is not a known command. With the switch on, as
`./dev run` and the bench's own server set it, both are there: the checks can fail."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings

from tests.live import ROOT

# Slow (manage.py processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

DEV_COMMANDS = ["bench", "measure_render", "seed_demo", "simulate"]
BASELINE = "/api/v1/_bench/baseline"
FLOOR = "/api/v1/_bench/floor"
# The route the URL resolves to, and the developer commands Django knows, as `manage.py` sees
# them in a process of its own.
PROBE = (
    "import django; django.setup()\n"
    "from django.core.management import get_commands\n"
    "from django.urls import resolve\n"
    f"print(resolve({BASELINE!r}).url_name)\n"
    f"print(resolve({FLOOR!r}).url_name)\n"
    f"print(','.join(sorted(set(get_commands()) & {set(DEV_COMMANDS)!r})))\n"
)


@pytest.fixture
def env(tmp_path):
    """The test run's environment without the developer tools switch (nor DEBUG)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))}
    for name in ("LOOPWARDEN_DEVTOOLS", "LOOPWARDEN_BENCH", "DEBUG", "PROMETHEUS_MULTIPROC_DIR"):
        env.pop(name, None)
    env.update(DJANGO_SETTINGS_MODULE="loopwarden.settings", LOOPWARDEN_DATA_DIR=str(tmp_path))
    return env


def probe(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_without_the_switch_no_benchmark_route_and_no_developer_commands(env):
    assert probe(env) == ["api-unrouted", "api-unrouted", ""]


def test_with_the_switch_the_route_and_the_commands_are_there(env):
    assert probe({**env, "LOOPWARDEN_DEVTOOLS": "true"}) == [
        "devtools-bench-baseline",
        "api-unrouted",
        ",".join(DEV_COMMANDS),
    ]


def test_the_floor_is_routed_in_the_benchs_own_server_only(env):
    """The floor writes trace rows whatever the task's state: not in `./dev run`'s server,
    which has the developer tools on but is not the bench's."""
    assert probe({**env, "LOOPWARDEN_DEVTOOLS": "true", "LOOPWARDEN_BENCH": "true"})[:2] == [
        "devtools-bench-baseline",
        "devtools-bench-floor",
    ]


def test_manage_py_bench_is_not_a_known_command_without_the_switch(env):
    done = subprocess.run(
        [sys.executable, "manage.py", "bench", "--quick"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode != 0
    assert "Unknown command: 'bench'" in done.stderr


def test_the_benchmark_url_answers_404_without_the_switch(agent_api):
    if "devtools" in settings.INSTALLED_APPS:
        pytest.skip("this run has LOOPWARDEN_DEVTOOLS=true")

    response = agent_api.post(BASELINE)

    assert response.status_code == 404
    assert response.body["error"]["code"] == "NOT_FOUND"


def test_dev_run_turns_the_developer_tools_on_before_it_seeds_the_demo():
    script = (ROOT / "dev").read_text()
    run = script[script.index("run() {") :]

    assert "export LOOPWARDEN_DEVTOOLS=true" in run
    assert run.index("export LOOPWARDEN_DEVTOOLS=true") < run.index("manage.py seed_demo")
