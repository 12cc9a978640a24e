"""What the embedded Ray node may print on the gateway's console: Serve's driver lines only from warnings up,
ray.init's false SIGTERM note never, unless the user asks for everything with --verbose."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from mcp_classifier.embedder.ray_console import RAY_WORKER_LOGGER, SERVE_LOGGER, quiet_driver_logs


@pytest.fixture
def ray_loggers() -> Iterator[tuple[logging.Logger, logging.Logger]]:
    serve_logger, worker_logger = logging.getLogger(SERVE_LOGGER), logging.getLogger(RAY_WORKER_LOGGER)
    saved = (serve_logger.level, list(worker_logger.filters))
    serve_logger.setLevel(logging.INFO)  # as importing ray.serve leaves it
    yield serve_logger, worker_logger
    serve_logger.setLevel(saved[0])
    worker_logger.filters[:] = saved[1]


def _passes(logger: logging.Logger, level: int, message: str) -> bool:
    if not logger.isEnabledFor(level):
        return False
    return bool(logger.filter(logger.makeRecord(logger.name, level, __file__, 1, message, (), None)))


def test_quiet_keeps_serve_warnings_and_drops_its_info_and_the_sigterm_note(ray_loggers: tuple[logging.Logger, logging.Logger]) -> None:
    serve_logger, worker_logger = ray_loggers
    quiet_driver_logs(verbose=False)
    quiet_driver_logs(verbose=False)  # a second start in the same process adds no second filter
    assert not _passes(serve_logger, logging.INFO, "Application 'mcp-classifier' is ready at http://127.0.0.1:26614/mcp-classifier.")
    assert _passes(serve_logger, logging.WARNING, "Deployment 'Embedder' has 1 replicas that have taken more than 30s to initialize.")
    assert not _passes(worker_logger, logging.WARNING, "SIGTERM handler is not set because current thread is not the main thread.")
    assert _passes(worker_logger, logging.WARNING, "some other warning from ray.init")
    assert len(worker_logger.filters) == 1


def test_verbose_leaves_every_ray_line_alone(ray_loggers: tuple[logging.Logger, logging.Logger]) -> None:
    serve_logger, worker_logger = ray_loggers
    quiet_driver_logs(verbose=True)
    assert _passes(serve_logger, logging.INFO, "Started Serve in namespace 'serve'.")
    assert _passes(worker_logger, logging.WARNING, "SIGTERM handler is not set because current thread is not the main thread.")
