"""The gunicorn hooks keep the metrics folder right: emptied at start, a dead worker's live
gauges dropped, its counters kept (what it counted still happened)."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from loopwarden import gunicorn_metrics


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(gunicorn_metrics, "METRICS_DIR", tmp_path)
    return tmp_path


def dead_pid() -> int:
    """The pid of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_master_drops_the_files_of_processes_that_ended_when_it_starts(folder):
    gone = dead_pid()
    for name in (f"counter_{gone}.db", f"histogram_{gone}.db", f"gauge_livesum_{gone}.db"):
        (folder / name).write_bytes(b"\0" * 8)
    (folder / "README").write_text("not ours")

    gunicorn_metrics.on_starting(server=None)

    assert sorted(p.name for p in folder.iterdir()) == ["README"]


def test_a_web_restart_keeps_the_files_of_processes_still_counting(folder):
    """A Celery worker on the same machine outlives a restart of the web server: its file is
    the one it goes on writing, so removing it hid every count it made until its own restart
    (the sweeps' runs, stops and decisions)."""
    alive, gone = os.getpid(), dead_pid()
    for name in (f"counter_{alive}.db", f"gauge_livesum_{alive}.db", f"counter_{gone}.db"):
        (folder / name).write_bytes(b"\0" * 8)

    gunicorn_metrics.on_starting(server=None)

    assert sorted(p.name for p in folder.iterdir()) == [
        f"counter_{alive}.db", f"gauge_livesum_{alive}.db",
    ]  # fmt: skip


def test_a_dead_worker_loses_its_live_gauges_and_keeps_its_counters(folder):
    for name in ("counter_11.db", "histogram_11.db", "gauge_livesum_11.db", "gauge_livesum_12.db"):
        (folder / name).write_bytes(b"\0" * 8)

    gunicorn_metrics.child_exit(server=None, worker=SimpleNamespace(pid=11))

    assert sorted(p.name for p in folder.iterdir()) == [
        "counter_11.db", "gauge_livesum_12.db", "histogram_11.db",
    ]  # fmt: skip
