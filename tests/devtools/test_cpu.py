"""The bench's CPU figures (devtools/cpu.py): read from /proc as the kernel keeps them, a process
that ended not lost, and the per-request table printed from them."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devtools import cpu
from devtools.cpu import CpuMeter, Snapshot, Spent, process_times
from devtools.management.commands import bench

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc")


def burn(seconds: float) -> None:
    started = os.times()
    while sum(os.times()[:2]) - sum(started[:2]) < seconds:
        pass


def test_a_processs_own_time_is_what_the_kernel_says_it_is():
    burn(0.05)
    before = os.times()
    times = process_times(os.getpid())
    after = os.times()

    assert times is not None and times.name
    assert times.parent == os.getppid()
    # os.times() reads the same counters: the figure lies between two readings of them.
    tick = 1 / cpu.TICKS
    assert before.user + before.system - tick <= times.own <= after.user + after.system + tick


def test_a_name_with_spaces_and_parentheses_is_read_past(tmp_path):
    (tmp_path / "42").mkdir()
    fields = ["S", "7"] + ["0"] * 9 + ["250", "50", "1000", "200"] + ["0"] * 30
    (tmp_path / "42" / "stat").write_text(f"42 (a (b) c) {' '.join(fields)}\n")

    times = process_times(42, tmp_path)

    assert times == cpu.ProcessTimes(42, "a (b) c", 7, 300 / cpu.TICKS, 1200 / cpu.TICKS)
    assert process_times(43, tmp_path) is None  # gone


def test_the_machines_busy_and_stolen_time(tmp_path):
    # user nice system idle iowait irq softirq steal guest guest_nice
    (tmp_path / "stat").write_text("cpu  100 10 50 800 20 5 5 10 0 0\ncpu0 1 2 3\n")

    busy, steal, total = cpu.machine_times(tmp_path)

    assert busy == pytest.approx(180 / cpu.TICKS)
    assert steal == pytest.approx(10 / cpu.TICKS)
    assert total == pytest.approx(1000 / cpu.TICKS)


def test_a_worker_that_ended_between_two_snapshots_is_still_counted():
    # A parent (the gunicorn master's place) runs a child that burns CPU and exits; the parent
    # reaps it and says how much CPU the child used, by the child's own count.
    script = textwrap.dedent(
        """
        import os, subprocess, sys
        sys.stdin.readline()
        child = subprocess.run([sys.executable, "-c", '''
        import os
        start = sum(os.times()[:2])
        while sum(os.times()[:2]) - start < 0.3:
            pass
        print(sum(os.times()[:2]))
        '''], capture_output=True, text=True, check=True)
        print(child.stdout.strip(), flush=True)
        sys.stdin.readline()
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        meter = CpuMeter(parent.pid)
        start = meter.snapshot()
        parent.stdin.write("go\n")
        parent.stdin.flush()
        child_cpu = float(parent.stdout.readline())
        end = meter.snapshot()  # the child has exited and been reaped
        spent = Spent()
        spent.add(start, end)
    finally:
        parent.stdin.write("done\n")
        parent.stdin.flush()
        parent.wait(timeout=10)

    assert child_cpu >= 0.3
    assert spent.seconds["server"] >= child_cpu - 2 / cpu.TICKS


def test_the_table_gives_each_workloads_cpu_per_request_and_the_ratio_it_allows():
    def run(requests: int, tasks: int, server: float, database: float, clients: float):
        done = bench.Run()
        done.merge({"gate": [1.0] * requests, "baseline": [1.0] * requests}, tasks=tasks)
        start = Snapshot(0, 0, 0, 0, 0, 0, 0)
        end = Snapshot(server, database, 1.9, 0.1, 2.0, clients, clients)
        done.cpu.add(start, end)
        return done

    meter = CpuMeter(os.getpid())
    meter.database_seen = True
    command = bench.Command(stdout=io.StringIO())
    # 95 decisions and 5 task creations; 100 baseline requests.
    decisions = run(95, 5, server=0.4, database=0.1, clients=0.1)
    baseline = run(100, 0, server=0.2, database=0.05, clients=0.05)

    command.report_cpu({"database": "PostgreSQL"}, meter, decisions, baseline, bench.Run())
    text = command.stdout.getvalue()

    rows = {line[:30].strip(): line[30:].split() for line in text.splitlines()}
    # ms per request: server, database, clients, all; then the machine's busy (stolen) share.
    assert rows["guard decisions (all)"] == ["4.00", "1.00", "1.00", "6.00", "95%", "(5%)"]
    assert rows["baseline: 1-row UPDATE"] == ["2.00", "0.50", "0.50", "3.00", "95%", "(5%)"]
    assert rows["decisions / baseline"] == ["2.00", "2.00", "2.00", "2.00"]
    assert "floor: a gate's database work" not in rows  # nothing measured, no row
    assert "would allow (the baseline's CPU per request over the decisions'): 0.50" in text


def test_a_pooled_client_outlives_its_slice_and_a_fresh_one_is_closed():
    class Fake:
        closed = False

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.closed = True

    pooled = Fake()
    with bench.kept({"t": pooled}, "t", Fake) as client:
        assert client is pooled
    assert not pooled.closed

    with bench.kept(None, "t", Fake) as fresh:
        pass
    assert fresh.closed


def test_on_sqlite_no_postgres_process_is_counted():
    # PostgreSQL runs on the machines that have it whatever the bench's database is: on SQLite
    # its processes are none of the bench's business.
    spent = CpuMeter(os.getpid(), database=False).snapshot()

    assert spent.database == 0.0


def test_connections_are_counted_by_the_worker_that_holds_them():
    # A master process (gunicorn's place) gets three accepted connections, hands two to one
    # worker, one to another and none to a third, and lets go of its own copies. Only the
    # server side of a connection has the listening port as its local port.
    master_script = textwrap.dedent(
        """
        import os, subprocess, sys
        groups = [[int(fd) for fd in group.split(",") if fd] for group in sys.argv[1:]]
        hold = [sys.executable, "-c", "import sys; sys.stdin.read()"]
        workers = [subprocess.Popen(hold, stdin=subprocess.PIPE, pass_fds=group)
                   for group in groups]
        for group in groups:
            for fd in group:
                os.close(fd)
        print("ready", flush=True)
        sys.stdin.readline()
        for worker in workers:
            worker.communicate()
        """
    )
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    accepted = [listener.accept()[0] for _ in clients]
    fds = [s.fileno() for s in accepted]
    master = subprocess.Popen(
        [sys.executable, "-c", master_script, f"{fds[0]},{fds[1]}", str(fds[2]), ""],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=fds,
    )  # fmt: skip
    try:
        for sock in accepted:
            sock.close()
        assert master.stdout.readline().strip() == "ready"

        assert cpu.connections_by_child(master.pid, port) == [2, 1, 0]
        assert cpu.connections_by_child(master.pid, listener.getsockname()[1] ^ 1) == [0, 0, 0]
    finally:
        master.communicate("done\n", timeout=10)
        for sock in [*clients, listener]:
            sock.close()


def test_each_agent_sends_its_decisions_baseline_and_floor_on_one_client():
    # One kept-alive connection per token for the three workloads: one server worker answers
    # them all, so no workload's ratio depends on how its own connections were spread.
    pool = bench.ClientPool("http://127.0.0.1:9/api/v1/", ["token-a", "token-b"])
    try:
        for token in ("token-a", "token-b"):
            client = pool.agents[token]
            assert pool.floors[token] is client
            assert pool.baselines[token] is client._http
        assert pool.agents["token-a"] is not pool.agents["token-b"]
    finally:
        pool.close()
