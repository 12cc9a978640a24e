"""CPU accounting with psutil: who eats the cores (server tree, load generator, other tenants)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil


class ProcessTree:
    """The server and every process it spawned (Ray's raylet, replicas, agents, ...).

    Needed twice: the model may run outside the gateway process (``--backend ray``), so CPU is
    summed over the tree; and descendants can outlive a SIGTERMed parent, so every one seen is
    remembered (pid + creation time, to never signal a recycled pid) and ended by pid at the end.
    """

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self.seen: dict[int, float] = {}

    def members(self) -> list[psutil.Process]:
        """The root and its current descendants, also recorded in `seen`."""
        try:
            root = psutil.Process(self.root_pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
        for proc in procs:
            try:
                self.seen.setdefault(proc.pid, proc.create_time())
            except psutil.NoSuchProcess:
                pass
        return procs

    def scan(self) -> None:
        self.members()

    def cpu_seconds(self) -> float | None:
        total, found = 0.0, False
        for proc in self.members():
            try:
                times = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue  # exited meanwhile
            total += times.user + times.system
            found = True
        return total if found else None

    def survivors(self) -> list[int]:
        """Remembered descendants still alive (same pid and creation time), root excluded."""
        alive = []
        for pid, created in self.seen.items():
            if pid == self.root_pid:
                continue
            try:
                proc = psutil.Process(pid)
                if proc.create_time() == created and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        return alive


def self_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def host_busy_seconds() -> float | None:
    """CPU-seconds all cores spent busy: minus server and load generator = other tenants."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


@dataclass
class CpuMark:
    """CPU counters at one instant; two of them give each party's share over a window."""

    server: float | None
    loadgen: float
    host: float | None

    @classmethod
    def take(cls, tree: ProcessTree) -> CpuMark:
        return cls(tree.cpu_seconds(), self_cpu_seconds(), host_busy_seconds())
