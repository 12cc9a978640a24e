"""How many CPUs this process may really use, and so how many gateway workers `workers 0` starts.

os.cpu_count() reports the host's cores; a pod limited by a CPU quota, or a process pinned to a few
cores, may use fewer. Workers beyond the usable CPUs only add context switches and memory.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_V2_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # "QUOTA PERIOD", or "max PERIOD" without a limit
CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")  # -1 without a limit
CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def cgroup_cpu_limit(
    cpu_max: Path = CGROUP_V2_CPU_MAX, v1_quota: Path = CGROUP_V1_QUOTA, v1_period: Path = CGROUP_V1_PERIOD
) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (1.5 for a 1500m limit), or None when there is none."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int(v1_quota.read_text())
        return None if quota_us <= 0 else quota_us / int(v1_period.read_text())
    except (OSError, ValueError):
        return None


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity), lowered to its cgroup quota rounded up; at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    if limit is not None:
        cpus = min(cpus, math.ceil(limit))
    return max(1, cpus)


def resolve_workers(requested: int, cap: int, cpus: int | None = None) -> int:
    """``requested`` gateway processes; 0 means one per usable CPU, at most ``cap``."""
    if requested > 0:
        return requested
    return max(1, min(cap, usable_cpus() if cpus is None else cpus))
