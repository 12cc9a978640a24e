"""The one log line a categories reload gets: the new version live, no change, or refused with the version kept.

The classifier only reports (whether a new version went live, and ``reload_error``); whoever asked
for the reload writes the line, once: the gateway's hot reload, or a replica. Worded in one place
from one reading, a refused file never also reads as "no change".
"""

from __future__ import annotations

import logging

from .results import ClassifierInfo


def log_reload(log: logging.Logger, trigger: str, changed: bool, info: ClassifierInfo) -> None:
    """Say how the reload ``trigger`` asked for ended, from ``info`` read after it."""
    version = info.category_set_version
    if changed:
        log.info("categories reload (%s): version %s live, %d categories", trigger, version, len(info.categories.categories))
    elif info.reload_error is not None:
        log.error("categories reload refused (%s), keeping version %s: %s", trigger, version, info.reload_error)
    else:
        log.info("categories reload (%s): no change, version %s stays live", trigger, version)
