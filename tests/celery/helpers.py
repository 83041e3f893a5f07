"""Helpers for the background-job tests: a loopback HTTP endpoint, real Celery processes.

A worker subprocess sees only committed data, so tests that start one are marked
`@pytest.mark.django_db(transaction=True)` and point the worker's DATABASE_URL at the test
database (`database_url(connection.settings_dict)` once pytest-django has created it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[2]


# -- a fake HTTP endpoint (reconciler, webhook receiver) --------------------------------------


@dataclass
class FakeEndpoint:
    """A tiny HTTP server on loopback. `answer` is the JSON it sends back (status 200);
    `delay` seconds of sleep first make the caller time out; `status` other than 200 fails."""

    answer: Any = field(default_factory=lambda: {"ok": True})
    status: int = 200
    delay: float = 0.0
    requests: list[dict] = field(default_factory=list)
    url: str = ""

    def bodies(self) -> list[Any]:
        return [r["json"] for r in self.requests]


@contextmanager
def fake_endpoint(**options: Any) -> Iterator[FakeEndpoint]:
    endpoint = FakeEndpoint(**options)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode()
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            with lock:
                endpoint.requests.append({"path": self.path, "json": parsed, "at": time.time()})
            if endpoint.delay:
                time.sleep(endpoint.delay)
            body = json.dumps(endpoint.answer).encode()
            try:
                self.send_response(endpoint.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the caller timed out and went away
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        server.server_close()


# -- real Celery processes ----------------------------------------------------------------------


def database_url(settings_dict: Mapping[str, Any]) -> str:
    """The DATABASE_URL of the (test) database described by `settings_dict`."""
    engine, name = settings_dict["ENGINE"], str(settings_dict["NAME"])
    if engine.endswith("sqlite3"):
        return f"sqlite:///{name}"
    user = quote(settings_dict.get("USER") or "", safe="")
    password = quote(settings_dict.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{quote(name, safe='')}"


def filesystem_transport_options(data_dir: Path) -> dict[str, str]:
    """The folders loopwarden/settings.py gives the filesystem broker under `data_dir`."""
    broker = data_dir / "broker"
    for sub in ("queue", "processed", "control"):
        (broker / sub).mkdir(parents=True, exist_ok=True)
    return {
        "data_folder_in": str(broker / "queue"),
        "data_folder_out": str(broker / "queue"),
        "processed_folder": str(broker / "processed"),
        "control_folder": str(broker / "control"),
        "polling_interval": 0.2,
    }


@dataclass
class CeleryProcesses:
    """A worker (and, when asked, beat) of the loopwarden app, each a real subprocess."""

    broker_url: str
    queue: str
    env: dict[str, str]
    log_dir: Path
    processes: list[tuple[str, subprocess.Popen]] = field(default_factory=list)

    def start(self, role: str, *extra: str, ready: str | None = None, timeout: float = 60) -> None:
        log_path = self.log_dir / f"{role}.log"
        log = log_path.open("wb")
        command = [sys.executable, "-m", "celery", "-A", "loopwarden", role, *extra]
        process = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        self.processes.append((role, process))
        if ready:
            wait_for(
                lambda: ready in log_path.read_text(errors="replace") or process.poll() is not None,
                timeout=timeout,
                message=f"celery {role} did not start",
                logs=self.logs,
            )
            if process.poll() is not None:
                raise AssertionError(f"celery {role} exited:\n{self.logs()}")

    def send(self, task, *args: Any, **options: Any) -> None:
        """Enqueue `task` through the app, on this broker and queue."""
        from loopwarden.celery import app

        transport_options = options.pop("transport_options", None)
        with app.connection_for_write(self.broker_url, transport_options=transport_options) as conn:
            task.apply_async(args=args, connection=conn, queue=self.queue, **options)

    def logs(self) -> str:
        parts = []
        for role, _process in self.processes:
            path = self.log_dir / f"{role}.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            parts.append(f"--- celery {role} ---\n" + "\n".join(text.splitlines()[-60:]))
        return "\n".join(parts)

    def stop(self) -> None:
        for _role, process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for _role, process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


@contextmanager
def celery_processes(
    *, broker_url: str, db_settings: Mapping[str, Any], data_dir: Path, **env: str
) -> Iterator[CeleryProcesses]:
    """Environment for worker/beat subprocesses: the test database, a queue of their own (so
    other workers on a shared Redis never take these messages), a private data directory."""
    queue = f"lw-test-{uuid.uuid4().hex[:12]}"
    data_dir.mkdir(parents=True, exist_ok=True)
    full_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "loopwarden.settings",
        "DATABASE_URL": database_url(db_settings),
        "CELERY_BROKER_URL": broker_url,
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "LOOPWARDEN_DATA_DIR": str(data_dir),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    full_env.pop("CELERY_TASK_ALWAYS_EAGER", None)
    procs = CeleryProcesses(broker_url=broker_url, queue=queue, env=full_env, log_dir=data_dir)
    try:
        yield procs
    finally:
        procs.stop()
        if broker_url.startswith("redis://"):
            import redis

            redis.Redis.from_url(broker_url).delete(queue, f"_kombu.binding.{queue}")


def worker_args(name: str) -> list[str]:
    """Flags for `celery worker`: one process, quick start, a name no other worker has."""
    return [
        "--pool=solo", "--loglevel=INFO", f"--hostname={name}@%h",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip


def wait_for(
    condition: Callable[[], Any],
    *,
    timeout: float,
    interval: float = 0.2,
    message: str = "condition not met",
    logs: Callable[[], str] | None = None,
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} within {timeout} s" + (f"\n{logs()}" if logs else ""))
        time.sleep(interval)


# -- comparing the database before and after ---------------------------------------------------


def db_snapshot() -> dict[str, list[dict]]:
    """Every row a sweep may touch, for "running it again changes nothing" checks."""
    from agents.models import AgentDay, Event, ModelCall, Notification, Phase, Task
    from ledger.models import Operation, Reconciliation

    models = (Task, Phase, Event, ModelCall, AgentDay, Notification, Operation, Reconciliation)
    return {model.__name__: list(model.objects.order_by("pk").values()) for model in models}
