"""Whether a load-test run counts: a run that measured nothing, or failed too often, is never a success."""

from __future__ import annotations

from typing import Any


def measured(summary: dict[str, Any]) -> tuple[int, int]:
    """(requests, failures) inside the measured steps; for the stages shape, Locust's whole-run total."""
    steps = summary.get("steps") or []
    if steps:
        return sum(s["requests"] for s in steps), sum(s["failures"] for s in steps)
    total = summary.get("total") or {}
    return int(total.get("num_requests", 0)), int(total.get("num_failures", 0))


def verdict(summary: dict[str, Any], max_failure_ratio: float) -> str | None:
    """None when the run counts; otherwise one line saying why it does not."""
    warm_up = summary.get("warm_up") or {}
    if warm_up.get("failed"):
        return f"{warm_up['failed']}; no step was measured (raise --warmup-timeout, or lower --hit-ratio)"
    requests, failures = measured(summary)
    if requests == 0:
        return "no requests were measured: the target answered nothing within the run"
    if failures > max_failure_ratio * requests:
        return (
            f"{failures} of {requests} measured requests failed ({failures / requests:.1%}), "
            f"above --max-failure-ratio {max_failure_ratio:g}"
        )
    return None
