"""A categories reload writes one line that says how it ended: refused (and the version kept), no change, or live.

A refused file must not log ERROR "reload refused" and then "reload: no change", which reads as a
contradiction. In process: HotReload over a backend that reloads the way the classifier does (a bool,
and reload_error for a refusal), no model.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from mcp_classifier.classify.registry import DEFAULT, CategorySource
from mcp_classifier.classify.reload_report import FILE_CHANGE
from mcp_classifier.classify.results import ClassifierInfo
from mcp_classifier.hot_reload import HotReload
from tests.support.fake_backend import FakeBackend

REFUSAL = "line 1: the file is not valid YAML"


class ReloadingBackend(FakeBackend):
    """Reloads as the classifier does: a refused file sets reload_error, any other outcome clears it."""

    def __init__(self) -> None:
        super().__init__()
        self.outcome = "unchanged"
        self.reload_error: str | None = None

    async def reload_categories(self) -> bool:
        self.reload_error = REFUSAL if self.outcome == "refused" else None
        return self.outcome == "changed"

    def classifier_info(self) -> ClassifierInfo:
        return replace(super().classifier_info(), reload_error=self.reload_error)


def reload_lines(outcome: str, caplog: pytest.LogCaptureFixture, tmp_path: Path, trigger: str = "SIGHUP") -> list[logging.LogRecord]:
    backend = ReloadingBackend()
    backend.outcome = outcome
    reload = HotReload(backend, {DEFAULT: CategorySource(tmp_path / "categories.yaml")})

    async def run() -> None:
        reload._lock = asyncio.Lock()  # what start() makes, without the file watch and the signal handler
        await reload.reload(trigger)

    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="mcp_classifier"):
        asyncio.run(run())
    return [r for r in caplog.records if "categories reload" in r.getMessage()]


def test_a_refused_file_logs_one_error_that_keeps_the_version(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    lines = reload_lines("refused", caplog, tmp_path)
    assert len(lines) == 1, [r.getMessage() for r in lines]
    version = FakeBackend().config.category_set_version
    message = lines[0].getMessage()
    assert lines[0].levelno == logging.ERROR
    assert "refused (SIGHUP)" in message and f"keeping version {version}" in message and REFUSAL in message
    assert not [r for r in caplog.records if "no change" in r.getMessage()], "no second line contradicting it"


@pytest.mark.parametrize(("outcome", "words"), [("unchanged", "no change"), ("changed", "live")])
def test_other_outcomes_log_one_info_line(outcome: str, words: str, caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    lines = reload_lines(outcome, caplog, tmp_path)
    assert [(r.levelno, words in r.getMessage(), "refused" in r.getMessage()) for r in lines] == [(logging.INFO, True, False)]


def test_a_file_event_that_changed_nothing_is_debug_only(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """A touched file, or a ConfigMap update of another key, re-reads identical content: nothing to report at INFO."""
    lines = reload_lines("unchanged", caplog, tmp_path, trigger=FILE_CHANGE)
    assert [(r.levelno, "no change" in r.getMessage()) for r in lines] == [(logging.DEBUG, True)]
    changed = reload_lines("changed", caplog, tmp_path, trigger=FILE_CHANGE)
    assert [r.levelno for r in changed] == [logging.INFO], "a new version going live is still said at INFO"
