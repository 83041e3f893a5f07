"""gunicorn hooks that keep the multiprocess metrics folder right (see agents/metrics.py).

    gunicorn -c python:loopwarden.gunicorn_metrics loopwarden.wsgi:application

or, from a gunicorn.conf.py of your own: `from loopwarden.gunicorn_metrics import *`.

- `on_starting` (the master, before any worker forks): empties the folder, so the counters
  of a previous run, and the files of its dead workers, are not summed into this one.
  Processes that write there and outlive the master (Celery workers on the same data dir)
  lose what they counted so far; Prometheus reads that as a counter reset, which its rate()
  and increase() handle.
- `child_exit` (the master, when a worker exits): drops the dead worker's live gauges.
  Counters stay: what a dead worker counted still happened.
"""

from __future__ import annotations

import os

from django.conf import settings

from loopwarden.env import ConfigError
from loopwarden.startup import fail

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loopwarden.settings")
# Reading a setting loads the settings, which put PROMETHEUS_MULTIPROC_DIR in the environment.
# prometheus_client chooses its storage when it is first imported, so it must come after.
try:
    METRICS_DIR = settings.PROMETHEUS_MULTIPROC_DIR
except ConfigError as exc:  # one line and a stop, as loopwarden/wsgi.py does
    fail(str(exc), 3)

from prometheus_client import multiprocess  # noqa: E402

__all__ = ["child_exit", "on_starting"]


def on_starting(server) -> None:
    for path in METRICS_DIR.glob("*.db"):
        path.unlink(missing_ok=True)


def child_exit(server, worker) -> None:
    multiprocess.mark_process_dead(worker.pid, str(METRICS_DIR))
