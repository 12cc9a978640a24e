"""How torch's OpenMP threads wait between parallel regions, chosen before torch is imported.

libgomp reads OMP_WAIT_POLICY once, when torch loads it. Its default lets a thread that finished its share
spin for the others. Where the model's threads share the cores with other busy processes (a shared node, a
replica beside the gateway, several model processes), the thread spun for is often not running, and every
layer waits out a scheduler slice: beside two busy processes on 2 cores a MiniLM forward took 25 times as
long (docs/decisions/0039-omp-wait-policy.md). Passive threads sleep at once and give the core back.

Sleeping at once costs a lone forward on idle cores about twice its time (each layer's threads are woken from
sleep). A short bounded spin first (libgomp's GOMP_SPINCOUNT, in rounds) wins that back where the cores are idle
and gives them up within a fraction of a millisecond where they are not (docs/decisions/0042-omp-spin-count.md).
"""

from __future__ import annotations

import os
from typing import Literal

OMP_WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
OMP_SPIN_COUNT_ENV = "GOMP_SPINCOUNT"
# MKL (inside torch's CPU build) keeps the buffers of its large matrix products for reuse and never hands them back:
# fitting a 100 x 8 categories file's token matches left 30 MiB held for good; with its fast memory manager off a
# second classifier adds 5 MiB, and forwards run at the same speed (docs/decisions/0041-router-door-cost-and-classifier-weight.md).
MKL_FAST_MM_ENV = "MKL_DISABLE_FAST_MM"
OmpWaitPolicy = Literal["passive", "active"]


def omp_env(policy: OmpWaitPolicy, spin_count: int) -> dict[str, str]:
    """The environment torch's native libraries read as they load: how its threads wait (the policy, and a passive
    thread's spin before it sleeps; an active one spins without bound, so the count is left to libgomp there), and
    MKL's buffers given back rather than kept."""
    env = {OMP_WAIT_POLICY_ENV: policy.upper(), MKL_FAST_MM_ENV: "1"}
    if policy == "passive":
        env[OMP_SPIN_COUNT_ENV] = str(spin_count)
    return env


def apply_omp_wait_policy(policy: OmpWaitPolicy, spin_count: int) -> None:
    """Sets the wait for torch in this process and every process it starts (model processes, Ray workers).

    A process that has already imported torch keeps the wait it loaded with; the processes it starts get
    this one."""
    os.environ.pop(OMP_SPIN_COUNT_ENV, None)  # one left from elsewhere would bound an active wait
    os.environ.update(omp_env(policy, spin_count))
