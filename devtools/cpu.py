"""CPU time by process group, read from Linux's /proc: what the bench's throughput phase spends
per request in the server's processes, in PostgreSQL's and in its own client threads.

Latency and throughput say how long; this says where the machine's CPU went, which is what
decides throughput on a machine whose cores every party shares (the server, the database and
the bench's simulated agents). A process that ended between two snapshots is not lost: once
its parent has reaped it, its time is in the parent's children's time (`cutime` and `cstime`),
which each snapshot adds for the gunicorn master and for PostgreSQL's postmaster.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# The groups a snapshot measures, in the order the bench prints them.
GROUPS = ("server", "database", "clients")


@dataclass(frozen=True)
class ProcessTimes:
    """One process's line of /proc/<pid>/stat: its name, parent, and CPU seconds (its own, and
    its reaped children's)."""

    pid: int
    name: str
    parent: int
    own: float
    children: float


def process_times(pid: int | str, proc: Path = PROC) -> ProcessTimes | None:
    """The process's times, or None when it is gone (or not readable)."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The name sits in parentheses and may hold spaces and parentheses itself: the fields
    # after it start past the last ")". Fields (1-based, proc(5)): 4 ppid, 14 utime,
    # 15 stime, 16 cutime, 17 cstime.
    name = text[text.index("(") + 1 : text.rindex(")")]
    rest = text[text.rindex(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(value) for value in rest[11:15])
    return ProcessTimes(
        int(pid), name, int(rest[1]), (utime + stime) / TICKS, (cutime + cstime) / TICKS
    )


def all_processes(proc: Path = PROC) -> list[ProcessTimes]:
    found = (process_times(entry.name, proc) for entry in proc.iterdir() if entry.name.isdigit())
    return [times for times in found if times is not None]


def machine_times(proc: Path = PROC) -> tuple[float, float, float]:
    """Seconds of all CPUs since boot (/proc/stat's first line): busy, stolen by the host (a
    virtual machine's neighbours), and in all."""
    line = (proc / "stat").read_text().splitlines()[0].split()
    user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in line[1:9])
    busy = user + nice + system + irq + softirq + steal
    return busy / TICKS, steal / TICKS, (busy + idle + iowait) / TICKS


def own_cpu() -> float:
    """This process's CPU seconds, all its threads together."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Snapshot:
    server: float
    database: float
    busy: float
    steal: float
    total: float
    clients_before: float  # this process, before the snapshot read /proc
    clients_after: float  # ... and after: the reading is not charged to the clients


@dataclass
class Spent:
    """CPU seconds by group (`GROUPS`), and the machine's, over the intervals added to it."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(GROUPS, 0.0))
    busy: float = 0.0
    steal: float = 0.0
    total: float = 0.0

    def add(self, start: Snapshot, end: Snapshot) -> None:
        self.seconds["server"] += end.server - start.server
        self.seconds["database"] += end.database - start.database
        self.seconds["clients"] += end.clients_before - start.clients_after
        self.busy += end.busy - start.busy
        self.steal += end.steal - start.steal
        self.total += end.total - start.total

    def absorb(self, other: Spent) -> None:
        for group in GROUPS:
            self.seconds[group] += other.seconds[group]
        self.busy += other.busy
        self.steal += other.steal
        self.total += other.total


class CpuMeter:
    """Snapshots of the CPU spent by a server (a process and every child of it: a gunicorn
    master and its workers), by PostgreSQL when it runs on this machine (every process named
    `postgres`), and by this process (the bench's client threads).

    Linux only: `available` is False elsewhere, and when PostgreSQL is not on this machine
    `database_seen` is False. With `database=False` (SQLite, inside the server's processes)
    no postgres process is counted.
    """

    def __init__(self, server_pid: int, proc: Path = PROC, *, database: bool = True) -> None:
        self.server_pid = server_pid
        self.proc = proc
        self.database = database
        self.available = (proc / "stat").exists() and (proc / str(server_pid)).exists()
        self.database_seen = False

    def snapshot(self) -> Snapshot:
        before = own_cpu()
        server = database = 0.0
        processes = all_processes(self.proc) if self.available else []
        names = {p.pid: p.name for p in processes}
        for p in processes:
            if p.pid == self.server_pid:
                server += p.own + p.children
            elif p.parent == self.server_pid:
                server += p.own
            if self.database and p.name == "postgres":
                self.database_seen = True
                database += p.own
                if names.get(p.parent) != "postgres":  # the postmaster: its reaped backends
                    database += p.children
        busy, steal, total = machine_times(self.proc) if self.available else (0.0, 0.0, 0.0)
        return Snapshot(server, database, busy, steal, total, before, own_cpu())

    def connections(self, port: int) -> list[int]:
        """The server's kept-alive connections to `port` per worker (`connections_by_child`)."""
        return connections_by_child(self.server_pid, port, self.proc) if self.available else []


def connections_by_child(server_pid: int, port: int, proc: Path = PROC) -> list[int]:
    """How many established TCP connections to `port` each child of `server_pid` holds (a
    gunicorn master's workers), most first, a worker holding none counted as 0; [] where
    /proc cannot tell. A gunicorn worker keeps every connection it accepted for as long as
    the client keeps it alive, so this is how a phase's kept-alive clients are spread over
    the workers that answer them."""
    established: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # proc(5): local address as HEX_IP:HEX_PORT, st (01 ESTABLISHED), ..., inode.
            if (
                len(fields) > 9
                and fields[3] == "01"
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                established.add(fields[9])
    children = [p.pid for p in all_processes(proc) if p.parent == server_pid]
    counts = []
    for pid in children:
        held = 0
        try:
            descriptors = list((proc / str(pid) / "fd").iterdir())
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                target = os.readlink(descriptor)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in established:
                held += 1
        counts.append(held)
    return sorted(counts, reverse=True)
