"""How many generated cases a fuzz test runs: its own count times FUZZ_SCALE (1 unless set).

The cases are derandomized, so every run generates the same ones: the count is the breadth, and more runs of the
same count find nothing new. The counts in the tests are what CI runs; `FUZZ_SCALE=3` reaches further (about
the breadth the fuzzers had before CI's time was budgeted), for a change to parsing or dispatch.
"""

from __future__ import annotations

import os


def fuzz_cases(count: int) -> int:
    return max(1, round(count * float(os.environ.get("FUZZ_SCALE", "1"))))
