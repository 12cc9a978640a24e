"""The one log line a categories reload gets: the new version live, no change, or refused with the version kept.

The classifier only reports (whether a new version went live, and ``reload_error``); whoever asked
for the reload writes the line, once: the gateway's hot reload, or a replica. Worded in one place
from one reading, a refused file never also reads as "no change".
"""

from __future__ import annotations

import logging

from .results import ClassifierInfo

FILE_CHANGE = "file change"  # the trigger of a reload the file watch asked for


def log_reload(log: logging.Logger, trigger: str, changed: bool, info: ClassifierInfo, *, refused_before: bool = False) -> None:
    """Say how the reload ``trigger`` asked for ended, from ``info`` read after it.

    "No change" after a file event is DEBUG: the watch fires on writes that leave the content as it was (a
    file touched or saved unchanged, a ConfigMap update of another key), and nothing happened to report.
    Asked for by an operator (SIGHUP), or ending a refusal the log reported (``refused_before``: the file was
    fixed back to the live version), it is INFO: someone is waiting for an answer.
    """
    version = info.category_set_version
    if changed:
        log.info("categories reload (%s): version %s live, %d categories", trigger, version, len(info.categories.categories))
    elif info.reload_error is not None:
        log.error("categories reload refused (%s), keeping version %s: %s", trigger, version, info.reload_error)
    else:
        level = logging.DEBUG if trigger == FILE_CHANGE and not refused_before else logging.INFO
        log.log(level, "categories reload (%s): no change, version %s stays live", trigger, version)
