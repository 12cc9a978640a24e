"""The TCP sockets a process tree listens on, for the tests that every listener stays on loopback."""

from __future__ import annotations

import ipaddress
import socket
import time
from typing import NamedTuple

import psutil

SNAPSHOTS = 3  # listings taken a second apart: a socket a late starter opens just after /ready is seen too


class Listener(NamedTuple):
    ip: str
    port: int
    pid: int
    cmdline: str

    def __str__(self) -> str:
        return f"{self.ip}:{self.port} held by pid {self.pid}: {self.cmdline}"


def is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def process_tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def tcp_listeners(pid: int) -> tuple[set[Listener], set[str]]:
    """The TCP sockets in LISTEN state of ``pid`` and everything under it, and the names of those processes."""
    found: set[Listener] = set()
    names: set[str] = set()
    for proc in process_tree(pid):
        try:
            connections = proc.net_connections(kind="inet")
            names.add(proc.name())
            cmdline = " ".join(proc.cmdline()).strip()[:200] or proc.name()
        except psutil.Error:  # ended since the tree was listed: it holds nothing now
            continue
        found.update(
            Listener(conn.laddr.ip, conn.laddr.port, proc.pid, cmdline)
            for conn in connections
            if conn.type == socket.SOCK_STREAM and conn.status == psutil.CONN_LISTEN
        )
    return found, names


def tcp_listeners_over_time(pid: int, snapshots: int = SNAPSHOTS) -> tuple[set[Listener], set[str]]:
    """The union of ``snapshots`` listings a second apart."""
    listeners: set[Listener] = set()
    processes: set[str] = set()
    for snapshot in range(snapshots):
        if snapshot:
            time.sleep(1.0)
        found, names = tcp_listeners(pid)
        listeners |= found
        processes |= names
    return listeners, processes


def exposed_listeners(listeners: set[Listener]) -> list[Listener]:
    """The listeners beyond loopback, in a stable order for the failure message."""
    return sorted((s for s in listeners if not is_loopback(s.ip)), key=lambda s: (s.pid, s.port))
