"""What the embedded Ray node may print on the gateway's console.

Ray forwards every actor's and replica's output to the driver (colour-prefixed lines, the model's
progress bars), and Serve logs its own start-up on the driver, including a URL that is not the
gateway's. A user of `serve` reads the gateway's lines; Ray's go to its session's log files unless
`verbose` is set, and the folder is named once.
"""

from __future__ import annotations

import logging
from pathlib import Path

SERVE_LOGGER = "ray.serve"  # Serve's driver-side logger, set to INFO with a handler of its own when ray.serve is imported
RAY_WORKER_LOGGER = "ray._private.worker"
# ray.init warns that it set no SIGTERM handler when called off the main thread (the backend starts on its
# own thread); the gateway handles SIGTERM itself, so the warning says nothing true about this process.
_SIGTERM_WARNING = "SIGTERM handler is not set"


class _DropSigtermWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(_SIGTERM_WARNING)


def quiet_driver_logs(verbose: bool) -> None:
    """Keep Serve's driver lines to warnings and drop ray.init's SIGTERM note; call after importing ray.serve."""
    if verbose:
        return
    logging.getLogger(SERVE_LOGGER).setLevel(logging.WARNING)
    worker_logger = logging.getLogger(RAY_WORKER_LOGGER)
    if not any(isinstance(f, _DropSigtermWarning) for f in worker_logger.filters):
        worker_logger.addFilter(_DropSigtermWarning())


def ray_logs_dir() -> Path | None:
    """The running node's log folder (Ray exposes it only on its private node object); None where it cannot say."""
    from ray._private import worker

    get_logs_dir = getattr(getattr(worker, "_global_node", None), "get_logs_dir_path", None)
    return Path(get_logs_dir()) if callable(get_logs_dir) else None
