"""The gunicorn hooks keep the metrics folder right: emptied at start, a dead worker's live
gauges dropped, its counters kept (what it counted still happened)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from loopwarden import gunicorn_metrics


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(gunicorn_metrics, "METRICS_DIR", tmp_path)
    return tmp_path


def test_the_master_empties_the_folder_when_it_starts(folder):
    for name in ("counter_11.db", "histogram_11.db", "gauge_livesum_12.db"):
        (folder / name).write_bytes(b"\0" * 8)
    (folder / "README").write_text("not ours")

    gunicorn_metrics.on_starting(server=None)

    assert sorted(p.name for p in folder.iterdir()) == ["README"]


def test_a_dead_worker_loses_its_live_gauges_and_keeps_its_counters(folder):
    for name in ("counter_11.db", "histogram_11.db", "gauge_livesum_11.db", "gauge_livesum_12.db"):
        (folder / name).write_bytes(b"\0" * 8)

    gunicorn_metrics.child_exit(server=None, worker=SimpleNamespace(pid=11))

    assert sorted(p.name for p in folder.iterdir()) == [
        "counter_11.db", "gauge_livesum_12.db", "histogram_11.db",
    ]  # fmt: skip
