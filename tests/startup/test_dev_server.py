"""`./dev run` serves with gunicorn (the repository's gunicorn.conf.py), not `runserver`: the
console's static files still answer under DEBUG, and an agent's kept-alive connection carries a
tool request and its result. The speed of that pair (no keep-alive stall) is a figure, measured
by `manage.py bench --dev-server`, not a timed assertion here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from loopwarden_client import Client

from tests.live import ROOT, free_port
from tests.startup.test_config_errors import clean_env  # noqa: F401  (a fixture)

# Slow (./dev run with all its processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow


@pytest.fixture
def dev_server(clean_env, tmp_path):  # noqa: F811
    port = free_port()
    data_dir = Path(clean_env["LOOPWARDEN_DATA_DIR"])
    venv = Path(sys.executable).parent.parent
    log = (tmp_path / "dev-run.log").open("w+")
    process = subprocess.Popen(
        [str(ROOT / "dev"), "run"],
        env={**clean_env, "LOOPWARDEN_VENV": str(venv), "PORT": str(port)},
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "Loopwarden: http" not in Path(log.name).read_text():
            assert process.poll() is None, Path(log.name).read_text()
            assert time.monotonic() < deadline, Path(log.name).read_text()
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", data_dir
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def test_dev_run_serves_static_files_and_a_kept_alive_tool_call(dev_server):
    url, data_dir = dev_server
    with httpx.Client(base_url=url, timeout=30) as http:
        served_by = http.get("/api/v1/tasks").headers.get("server", "")
        css = http.get("/static/css/console.css")
        sign_in = http.get("/login/", follow_redirects=True)

    assert "gunicorn" in served_by
    assert css.status_code == 200 and css.content
    assert sign_in.status_code == 200 and "/static/css/console.css" in sign_in.text

    token = (data_dir / "demo-agent.token").read_text().strip()
    # One httpx client under the thin client: the connection is kept alive between requests.
    with Client(url + "/api/v1/", token, timeout=30) as client:
        task = client.create_task("dev server: one tool call")["id"]
        for step in range(3):
            call = client.request_tool(task, "search", {"q": f"step {step}"})
            answer = client.report_result(
                task,
                call["tool_call"],
                "SUCCESS",
                data={"step": step},
                evidence={"revision": step + 1, "done": False},
            )

            assert call["decision"] == "EXECUTE" and answer["decision"] == "CONTINUE"


def start_dev_run(env: dict, port: int, log_path: Path) -> subprocess.Popen:
    venv = Path(sys.executable).parent.parent
    env = {**env, "LOOPWARDEN_VENV": str(venv), "PORT": str(port)}
    env.pop("PYTHONWARNINGS", None)  # the terminal as a user sees it: warnings shown
    return subprocess.Popen(
        [str(ROOT / "dev"), "run"], env=env, stdout=log_path.open("w"),
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_for(predicate, process: subprocess.Popen, log_path: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert process.poll() is None, log_path.read_text()
        assert time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.2)


BANNER = "Loopwarden: http"


def test_the_banner_is_the_last_line_and_the_terminal_stays_clean(clean_env, tmp_path):  # noqa: F811
    port = free_port()
    data_dir = Path(clean_env["LOOPWARDEN_DATA_DIR"])
    terminal = tmp_path / "terminal.log"
    process = start_dev_run(clean_env, port, terminal)
    simulator_log = data_dir / "simulator.log"
    try:
        wait_for(lambda: BANNER in terminal.read_text(), process, terminal)
        # The simulator has driven a scenario (its lines are in its log file) and every process
        # has had time to say what it says at start.
        wait_for(
            lambda: simulator_log.exists() and "EXECUTE" in simulator_log.read_text(),
            process, terminal,
        )  # fmt: skip
        time.sleep(3)
        text = terminal.read_text()
    finally:
        stop(process)

    lines = [line for line in text.splitlines() if line.strip()]
    assert BANNER in lines[-1], text
    assert f"http://127.0.0.1:{port}/" in lines[-1] and "admin/admin" in lines[-1]
    for word in ("Warning", "Traceback", "Not Found", "No hostname"):
        assert word not in text, text
    # The simulator's lines go to its log file, not the terminal.
    assert "EXECUTE" not in text
    assert "EXECUTE" in simulator_log.read_text()


def test_loopwarden_simulator_false_runs_without_the_simulator(clean_env, tmp_path):  # noqa: F811
    port = free_port()
    data_dir = Path(clean_env["LOOPWARDEN_DATA_DIR"])
    terminal = tmp_path / "terminal.log"
    process = start_dev_run({**clean_env, "LOOPWARDEN_SIMULATOR": "false"}, port, terminal)
    try:
        wait_for(lambda: BANNER in terminal.read_text(), process, terminal)
        time.sleep(5)
        token = (data_dir / "demo-agent.token").read_text().strip()
        tasks = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/tasks",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        text = terminal.read_text()
    finally:
        stop(process)

    assert tasks.status_code == 200 and tasks.json()["tasks"] == [], tasks.text
    assert not (data_dir / "simulator.log").exists()
    assert "simulator.1" not in text and "simulated agent" not in text


def dev_reset(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`./dev reset` with this test run's virtualenv."""
    venv = Path(sys.executable).parent.parent
    return subprocess.run(
        [str(ROOT / "dev"), "reset"], env={**env, "LOOPWARDEN_VENV": str(venv)},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_dev_reset_removes_the_demo_state(clean_env, tmp_path):  # noqa: F811
    data_dir = Path(clean_env["LOOPWARDEN_DATA_DIR"])
    data_dir.mkdir(parents=True)
    (data_dir / "loopwarden.sqlite3").write_text("x")
    (data_dir / "demo-agent.token").write_text("x")
    (data_dir / "broker").mkdir()
    (data_dir / "broker" / "message").write_text("x")
    result = dev_reset(clean_env)

    assert result.returncode == 0, result.stderr
    assert not (data_dir / "loopwarden.sqlite3").exists() and not (data_dir / "broker").exists()
    assert "loopwarden.sqlite3" in result.stdout and "broker" in result.stdout


def test_dev_reset_refuses_while_dev_run_runs_on_its_data(dev_server, clean_env):  # noqa: F811
    url, data_dir = dev_server

    result = dev_reset(clean_env)

    assert result.returncode == 1, result.stdout
    assert "./dev run" in result.stderr and "removed" not in result.stdout
    assert (data_dir / "loopwarden.sqlite3").exists() and (data_dir / "broker").exists()
    assert httpx.get(url + "/login/", timeout=30).status_code == 200
