"""Whether this CPU multiplies bf16 matrices in hardware (Intel AMX): the encoder then suggests --dtype bfloat16.

On AMX cores oneDNN runs a bf16 linear layer on the tile unit: MiniLM's batched forward ran about
1.5x faster than fp32 on this project's 2-core Sapphire Rapids host, with the same category for
1388 of 1389 labelled queries (docs/decisions/0013-cpu-bf16-on-amx.md). fp32 stays the CPU default all
the same: in bf16 a text's confidence moves a little (90th percentile 0.004 on 240 router queries, the
odd borderline one by ~0.1) and with the texts it is batched with, where fp32 answers agree to 1e-5
however a batch is made. CPUs without AMX were not measured here, so the suggestion is made
only where the flag is. It is read from the kernel's /proc/cpuinfo (Linux, where the service
runs): torch has no public check for it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import torch

CPUINFO = Path("/proc/cpuinfo")
AMX_BF16_FLAG = "amx_bf16"


def cpu_flags(cpuinfo: str) -> set[str]:
    """The feature flags of the first processor listed (every core of a host has the same ones)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return set(value.split())
    return set()


@cache
def amx_bf16_available(cpuinfo_path: Path = CPUINFO) -> bool:
    """True where the CPU has AMX-BF16 and torch's oneDNN can use it for bf16 matmuls."""
    try:
        flags = cpu_flags(cpuinfo_path.read_text(errors="replace"))
    except OSError:  # not Linux, or /proc not mounted: no evidence of AMX, keep fp32
        return False
    return AMX_BF16_FLAG in flags and torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
