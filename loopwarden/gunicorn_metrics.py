"""gunicorn hooks that keep the multiprocess metrics folder right (see agents/metrics.py).

    gunicorn -c python:loopwarden.gunicorn_metrics loopwarden.wsgi:application

or, from a gunicorn.conf.py of your own: `from loopwarden.gunicorn_metrics import *`.

- `on_starting` (the master, before any worker forks): drops the files of processes that
  have ended, so the counters of a previous run and of its dead workers are not summed into
  this one (Prometheus reads the drop as a counter reset, which rate() and increase()
  handle). The files of processes still running are kept: Celery workers on the same data
  dir outlive a restart of the web server and go on counting into them.
- `child_exit` (the master, when a worker exits): drops the dead worker's live gauges.
  Counters stay: what a dead worker counted still happened.
"""

from __future__ import annotations

import os

from django.conf import settings

from loopwarden.processes import alive
from loopwarden.startup import one_line_on_config_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loopwarden.settings")
# Reading a setting loads the settings, which put PROMETHEUS_MULTIPROC_DIR in the environment.
# prometheus_client chooses its storage when it is first imported, so it must come after.
with one_line_on_config_error(3):  # one line and a stop, as loopwarden/wsgi.py does
    METRICS_DIR = settings.PROMETHEUS_MULTIPROC_DIR

from prometheus_client import multiprocess  # noqa: E402

__all__ = ["child_exit", "on_starting"]


def on_starting(server) -> None:
    for path in METRICS_DIR.glob("*.db"):
        if not alive(_pid_of(path.stem)):
            path.unlink(missing_ok=True)


def _pid_of(stem: str) -> int | None:
    """The process a file of prometheus_client's belongs to (`counter_123`: 123)."""
    pid = stem.rpartition("_")[2]
    return int(pid) if pid.isdigit() else None


def child_exit(server, worker) -> None:
    multiprocess.mark_process_dead(worker.pid, str(METRICS_DIR))
