"""Each CPU replica on cores of its own, where the node's CPUs are Ray's alone.

On the embedded 2-core node, two replicas of one CPU each are moved between the cores by the kernel as
the gateway and Ray's own processes come and go, and each move leaves the forward's caches behind.
Pinned, each replica's process (its forward thread and Serve's request path beside it) stays on its own
core. On the 2-core node, in four alternating server starts each, pinned served 1.22 times as many
requests at 8 clients and 1.13 times at 32, with a lone request's p50 3 ms lower (docs/decisions/0011-replica-cpu-pinning.md).

Pinning is only safe where the cores are the node's: a pod whose cpuset is exactly what Ray was given
(Kubernetes' static CPU manager), or the node the gateway started itself. A pod that sees all of a
shared machine's cores would otherwise stack every pod's replica 0 on core 0. Replicas are placed by
their rank on the node, so replica k takes the k-th slice of the allowed cores.

Written by hand: the affinity calls are the standard library's; what is the product's own is which
slice a replica takes and when pinning is safe.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence
from typing import Literal

log = logging.getLogger(__name__)

CpuPinning = Literal["auto", "on", "off"]


def replica_cpus(allowed: Sequence[int], local_rank: int, replica_cpus_assigned: float) -> list[int] | None:
    """The cores replica ``local_rank`` of this node takes: the ``local_rank``-th slice of ``allowed``.

    None where it has no whole CPU assigned (fractional replicas share cores) or its slice runs past the
    allowed cores (more replicas than cores: the kernel spreads them better than a pin would).
    """
    if replica_cpus_assigned < 1 or local_rank < 0:
        return None
    width = math.ceil(replica_cpus_assigned)
    cores = sorted(allowed)
    start = local_rank * width
    if start + width > len(cores):
        return None
    return cores[start : start + width]


def pinning_applies(choice: CpuPinning, allowed_count: int, node_cpus: float) -> bool:
    """on: always; auto: where the process may run on no more cores than Ray was given for the node."""
    if choice == "on":
        return True
    return choice == "auto" and 0 < allowed_count <= node_cpus


def choose_replica_cores(
    choice: CpuPinning,
    allowed: Sequence[int],
    *,
    node_cpus: Callable[[], float],
    local_rank: Callable[[], int],
    assigned_cpus: Callable[[], float],
) -> list[int] | None:
    """The cores this replica should be pinned to, or None; the lookups are Ray's (node resources, replica rank).

    Pinning only speeds a replica up, so a lookup that fails leaves it unpinned with a warning: the replica serves on.
    """
    if choice == "off":
        return None
    try:
        cpus_on_node = node_cpus()
        if not pinning_applies(choice, len(allowed), cpus_on_node):
            log.info("replica not pinned: it may run on %d cores, Ray has %g on this node", len(allowed), cpus_on_node)
            return None
        rank = local_rank()
        cores = replica_cpus(allowed, rank, assigned_cpus())
    except Exception as exc:  # noqa: BLE001 - an optimisation: never the reason a replica fails to start
        log.warning("replica not pinned: %s", exc)
        return None
    if cores is None:
        log.info("replica %d not pinned: no whole-CPU slice of cores %s is its own", rank, list(allowed))
    return cores


def pin_process(cpus: Sequence[int]) -> int:
    """Every thread of this process onto ``cpus`` (threads started later inherit it); the count pinned.

    ``os.sched_setaffinity`` on a thread id applies to that thread alone on Linux, so each is set.
    """
    pinned = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
            pinned += 1
        except (ProcessLookupError, PermissionError):  # a thread that ended meanwhile, or one the kernel keeps
            continue
    return pinned
