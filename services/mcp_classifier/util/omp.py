"""How torch's OpenMP threads wait between parallel regions, chosen before torch is imported.

libgomp reads OMP_WAIT_POLICY once, when torch loads it. Its default lets a thread that finished its share
spin for the others. Where the model's threads share the cores with other busy processes (a shared node, a
replica beside the gateway, several model processes), the thread spun for is often not running, and every
layer waits out a scheduler slice: beside two busy processes on 2 cores a MiniLM forward took 25 times as
long (docs/decisions/0039-omp-wait-policy.md). Passive threads sleep at once and give the core back.
"""

from __future__ import annotations

import os
from typing import Literal

OMP_WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
OmpWaitPolicy = Literal["passive", "active"]


def apply_omp_wait_policy(policy: OmpWaitPolicy) -> None:
    """Sets the policy for torch in this process and every process it starts (model processes, Ray workers).

    A process that has already imported torch keeps the policy it loaded with; the processes it starts get
    this one."""
    os.environ[OMP_WAIT_POLICY_ENV] = policy.upper()
