"""Live servers for `manage.py bench` and the tests: the app under gunicorn, several processes.

pytest-django's `live_server` runs one threaded server inside the test process; that is enough
for the client tests, but it cannot show what several web workers do to one task at once. Here
the app runs the way it is deployed: a gunicorn master with worker processes, each with its own
database connection, against the database the test run (or the bench) uses.

The caller owns the data: tests that use a gunicorn server must commit what the server should
see, so they are marked `@pytest.mark.django_db(transaction=True)`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

ROOT = Path(__file__).resolve().parents[1]
API_PREFIX = "/api/v1/"


@dataclass(frozen=True)
class GunicornServer:
    """A running gunicorn: `url` is the site root, `api` the runner API's base URL."""

    url: str
    process: subprocess.Popen
    log_path: Path
    workers: int

    @property
    def api(self) -> str:
        return self.url + API_PREFIX

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url(settings_dict: Mapping[str, Any]) -> str:
    """The DATABASE_URL that points a subprocess at the database of `settings_dict`.

    Pass `connection.settings_dict` once pytest-django has set up the test database: its NAME
    is then the test database (`test_<name>` on PostgreSQL, the test file on SQLite).
    """
    engine = settings_dict["ENGINE"]
    name = str(settings_dict["NAME"])
    if engine.endswith("sqlite3"):
        if name == ":memory:" or name.startswith("file:"):
            raise ValueError("an in-memory SQLite database cannot be shared with a subprocess")
        return f"sqlite:///{Path(name).resolve()}"
    if "postgresql" not in engine:
        raise ValueError(f"no DATABASE_URL for engine {engine}")
    user = quote(settings_dict.get("USER") or "", safe="")
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{quote(name, safe='')}"


def _answers(url: str) -> bool:
    try:
        httpx.get(url + API_PREFIX + "tasks", timeout=2.0)
    except httpx.HTTPError:
        return False
    return True  # any HTTP answer (401 here) means a worker is serving


def _warm_up(url: str, workers: int) -> None:
    """Send a burst so every worker has served a request before the measured ones."""
    with ThreadPoolExecutor(max_workers=workers * 2) as pool:
        list(pool.map(lambda _: _answers(url), range(workers * 4)))


@contextmanager
def gunicorn_server(
    *,
    database_url: str,
    workers: int = 4,
    threads: int = 1,
    env: Mapping[str, str] | None = None,
    startup_timeout: float = 30.0,
) -> Iterator[GunicornServer]:
    """Run `gunicorn loopwarden.wsgi` with `workers` processes against `database_url`.

    Waits until it answers HTTP, yields it, and stops it (SIGTERM to the master, which stops
    its workers; SIGKILL to the process group if that takes too long). `env` adds to or
    overrides the server's environment. The server log is kept in a temporary file and shown
    if the server does not come up; it is removed with the server's data dir at the end.
    """
    data_dir = Path(tempfile.mkdtemp(prefix="loopwarden-live-"))
    server_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "loopwarden.settings",
        "DATABASE_URL": database_url,
        # Own data dir: the Celery filesystem broker and the secret-key file stay out of var/.
        "LOOPWARDEN_DATA_DIR": str(data_dir),
        "SECRET_KEY": os.environ.get("SECRET_KEY") or "live-server-secret-key-for-tests-only",
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        # Its own metrics folder too: the test process put its own in the environment.
        "PROMETHEUS_MULTIPROC_DIR": str(data_dir / "prometheus"),
        **(env or {}),
    }
    server = None
    try:
        for attempt in range(3):
            # The free port may be taken by someone else before gunicorn binds it: try another.
            server = _start(data_dir / f"gunicorn-{attempt}.log", server_env, workers, threads)
            if _wait_until_up(server, startup_timeout):
                break
            _stop(server.process)
            if "Address already in use" not in server.log_tail():
                raise RuntimeError(f"gunicorn did not come up:\n{server.log_tail()}")
        else:
            raise RuntimeError(f"gunicorn found no free port:\n{server.log_tail()}")
        _warm_up(server.url, workers * threads)
        yield server
    finally:
        if server is not None:
            _stop(server.process)
        shutil.rmtree(data_dir, ignore_errors=True)


def _start(log_path: Path, env: Mapping[str, str], workers: int, threads: int) -> GunicornServer:
    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "loopwarden.wsgi:application",
        "--bind", f"127.0.0.1:{port}",
        "--workers", str(workers),
        "--threads", str(threads),
        "--preload",  # import the app once in the master: workers are ready when forked
        "--config", str(ROOT / "gunicorn.conf.py"),  # as deployed: gthread, timeouts, metrics
        "--timeout", "60",
        "--graceful-timeout", "5",
        "--log-level", "warning",
    ]  # fmt: skip
    with open(log_path, "wb") as log:  # the child keeps its own handle
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stopping it reaches the workers
        )  # fmt: skip
    return GunicornServer(f"http://127.0.0.1:{port}", process, log_path, workers)


def _wait_until_up(server: GunicornServer, timeout: float) -> bool:
    """True once it answers HTTP; False if it exited or stayed silent for `timeout` s."""
    deadline = time.monotonic() + timeout
    while not _answers(server.url):
        if server.process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
