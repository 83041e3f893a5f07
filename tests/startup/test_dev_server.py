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
