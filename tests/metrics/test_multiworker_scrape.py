"""/metrics under gunicorn with several worker processes, the way it is deployed.

Agents drive decisions through the runner API at once, so different workers answer them; every
worker counts in its own file, and a scrape, whichever worker serves it, shows the sum of all
of them. Runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict, mmap_key

from tests.live import Api, database_url, gunicorn_server, race
from tests.metrics.exposition import TOKEN, Exposition, parse

# Slow (gunicorn processes): `./dev test` leaves it out, CI runs it.
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WORKERS = 4
TASKS = 8
ROUNDS = 3
DECISIONS = "loopwarden_decisions_total"


def stale_counter_file(folder: Path) -> None:
    """What a previous run left: 1000 ALLOWs counted by a process long gone."""
    folder.mkdir(parents=True, exist_ok=True)
    key = mmap_key(DECISIONS, DECISIONS, ["kind", "decision", "reason"],
                   ["model_call", "ALLOW", ""], "old run")  # fmt: skip
    stale = MmapedDict(str(folder / "counter_4000000.db"))
    stale.write_value(key, 1000.0, 0.0)
    stale.close()


@pytest.fixture
def server(transactional_db, tmp_path):
    from django.db import connection

    folder = tmp_path / "prometheus"
    stale_counter_file(folder)
    with gunicorn_server(
        database_url=database_url(connection.settings_dict),
        workers=WORKERS,
        threads=1,  # one request per process at a time: parallel requests need several workers
        env={"DB_CONN_MAX_AGE": "0", "METRICS_TOKEN": TOKEN,
             "PROMETHEUS_MULTIPROC_DIR": str(folder)},
    ) as running:  # fmt: skip
        yield running, folder


def scrape(url: str) -> Exposition:
    response = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.text[:300]
    return parse(response.text)


def counting_pids(folder: Path) -> set[int]:
    return {int(path.stem.split("_")[-1]) for path in folder.glob("counter_*.db")}


def agent_loop(api: Api, task_id: str) -> list[tuple[str, int, str]]:
    """ROUNDS of gate, usage, tool request and result with progress; then the agent stops."""
    answers = []

    def step(name: str, path: str, body: dict) -> dict:
        status, answer = api.post(f"tasks/{task_id}/{path}", body)
        # The stop answers the task; every other step a decision.
        word = answer.get("state" if name == "stop" else "decision") if status == 200 else answer
        answers.append((name, status, word))
        return answer

    for n in range(1, ROUNDS + 1):
        call = step("gate", "model-calls", {"est_prompt_tokens": 10})["model_call"]
        step("usage", f"model-calls/{call}/usage", {"prompt_tokens": 10, "completion_tokens": 5})
        read = {"tool": "export_page", "args": {"page": n}, "effect": "read"}
        tool_call = step("tool", "tool-calls", read)
        step("result", f"tool-calls/{tool_call['tool_call']}/result",
             {"kind": "SUCCESS", "evidence": {"revision": n, "done": False}})  # fmt: skip
    step("stop", "stop", {})
    return answers


def test_a_scrape_of_any_worker_shows_the_decisions_of_every_worker(server, make_agent):
    gunicorn, folder = server
    _, token = make_agent("crowd", namespace="ns-crowd")
    # A new connection per request: a gthread worker keeps the connections it accepted, and
    # decisions fast enough let one worker serve every kept-alive connection of the race.
    api = Api(gunicorn.api, token, keepalive=False)
    try:
        task_ids = [api.post("tasks", {"goal": f"export {i}"})[1]["id"] for i in range(TASKS)]

        assert httpx.get(f"{gunicorn.url}/metrics").status_code == 401
        before = scrape(gunicorn.url)
        # The master emptied the folder at start: the old run's 1000 ALLOWs are gone.
        assert before.total(DECISIONS) == 0
        assert before.value("loopwarden_tasks", state="RUNNING") == TASKS

        answers = race([lambda t=t: agent_loop(api, t) for t in task_ids])
    finally:
        api.close()

    expected = {"gate": "ALLOW", "usage": "CONTINUE", "tool": "EXECUTE", "result": "CONTINUE",
                "stop": "STOPPED"}  # fmt: skip
    assert [a for loop in answers for a in loop if (a[1], a[2]) != (200, expected[a[0]])] == []
    pids = counting_pids(folder)
    assert len(pids) >= 2, "every decision was served by one worker: nothing was summed"

    scrapes = [scrape(gunicorn.url) for _ in range(2 * WORKERS)]  # served by various workers
    for after in scrapes:
        per_kind = TASKS * ROUNDS
        assert after.value(DECISIONS, kind="model_call", decision="ALLOW", reason="") == per_kind
        assert after.value(DECISIONS, kind="usage", decision="CONTINUE", reason="") == per_kind
        assert after.value(DECISIONS, kind="tool_call", decision="EXECUTE", reason="") == per_kind
        assert after.value(DECISIONS, kind="tool_result", decision="CONTINUE", reason="") == (
            per_kind
        )
        assert after.value(DECISIONS, kind="stop", decision="STOP", reason="agent_stop") == TASKS
        assert after.total(DECISIONS) == 4 * per_kind + TASKS
        assert after.value("loopwarden_stops_total", reason="agent_stop",
                           code="GUARD_STOPPED") == TASKS  # fmt: skip
        assert after.value("loopwarden_decision_seconds_count", kind="model_call") == per_kind
        assert after.value("loopwarden_tasks", state="RUNNING") == 0
        assert after.value("loopwarden_tasks", state="STOPPED") == TASKS

    # A worker that dies takes nothing with it: what it counted still happened.
    worker = next(pid for pid in sorted(pids) if _parent_of(pid) == gunicorn.process.pid)
    os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while _parent_of(worker) == gunicorn.process.pid and time.monotonic() < deadline:
        time.sleep(0.1)  # until the master has reaped it (and run child_exit)
    assert scrape(gunicorn.url).total(DECISIONS) == 4 * TASKS * ROUNDS + TASKS


def _parent_of(pid: int) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:"))
