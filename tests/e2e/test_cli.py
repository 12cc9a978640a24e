"""The command line as a user runs it: a real `mcp-classifier` process per test."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from mcp_classifier.settings import ENV_PREFIX
from mcp_classifier.telemetry import PROGRESS_BARS_ENV
from tests.support import assert_valid_classification

# A one-shot command loads the model in its own process: about 15 s on a quiet 2-core host.
CLASSIFY_TIMEOUT_S = 300
QUIET_ENV = {f"{ENV_PREFIX}LOG_LEVEL", f"{ENV_PREFIX}LOG_FORMAT", f"{ENV_PREFIX}VERBOSE", PROGRESS_BARS_ENV}
TEXT_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")


def test_invalid_setting_is_refused_with_a_clear_message() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", "classify", "hi"],
        capture_output=True,
        text=True,
        env={**os.environ, f"{ENV_PREFIX}BATCH_SIZE": "zero"},
    )
    assert done.returncode == 2 and "batch_size" in done.stderr


def _classify(*flags: str) -> subprocess.CompletedProcess[str]:
    """`classify` as a user runs it, with no log setting from this environment (stderr is a pipe: not a terminal)."""
    env = {k: v for k, v in os.environ.items() if k not in QUIET_ENV}
    return subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", "classify", "What is 5 + 3?", *flags],
        capture_output=True,
        text=True,
        check=True,
        timeout=CLASSIFY_TIMEOUT_S,
        env=env,
    )


def test_classify_command_prints_its_answer_and_nothing_else(category_count: int) -> None:
    done = _classify("--with-probabilities")
    (line,) = done.stdout.splitlines()
    result = json.loads(line)
    assert_valid_classification(result, category_count)
    assert result["category"] == "math" and result["use_reasoning"] is False
    # Warnings only: no line of how the model loaded, no progress bar.
    assert "Loading weights" not in done.stderr
    levels = [json.loads(line)["level"] for line in done.stderr.splitlines()]
    assert not set(levels) - {"WARNING", "ERROR", "CRITICAL"}, done.stderr


def test_classify_verbose_logs_readable_lines_with_the_engine_details_left_at_debug() -> None:
    done = _classify("--verbose", "--log-format", "text")
    assert json.loads(done.stdout)["category"] == "math"
    lines = [line for line in done.stderr.splitlines() if TEXT_LOG_LINE.match(line)]
    assert any("category index built" in line for line in lines), done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("{")], done.stderr
    assert "tokens of padding" not in done.stderr  # an engine detail: --log-level debug shows it


def test_missing_categories_file_exits_with_a_clear_error(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", "classify", "hi", "--categories-file", str(tmp_path / "none.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "cannot read categories file" in done.stderr
