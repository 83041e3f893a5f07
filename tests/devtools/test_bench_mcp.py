"""`manage.py bench_mcp` measures every row it reports, with real processes (no timing asserted):
the echo tool directly, the runner API's pair and the gateway, one client and several."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.live import ROOT

# Slow (runs the bench against gateway processes): `./dev test` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

pytest.importorskip("mcp")


def test_it_reports_what_the_gateway_adds(tmp_path):
    env = {**os.environ, "LOOPWARDEN_DEVTOOLS": "true", "LOOPWARDEN_DATA_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "bench_mcp", "--calls", "6", "--clients", "2",
         "--database-url", f"sqlite:///{tmp_path / 'bench.sqlite3'}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {line[:34].strip(): line[34:].split() for line in done.stdout.splitlines()}
    for name in ("direct", "runner API pair", "gateway"):
        for clients in ("1 client", "2 clients"):
            p50, p95 = map(float, rows[f"{name}, {clients}"])
            assert 0 < p50 <= p95
    assert "1 client: the gateway adds" in done.stdout
    assert "2 clients: the gateway adds" in done.stdout
