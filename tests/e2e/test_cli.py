"""The command line as a user runs it: a real `mcp-classifier` process per test."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from mcp_classifier.settings import ENV_PREFIX
from tests.support import assert_valid_classification


def test_invalid_setting_is_refused_with_a_clear_message() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", "classify", "hi"],
        capture_output=True,
        text=True,
        env={**os.environ, f"{ENV_PREFIX}BATCH_SIZE": "zero"},
    )
    assert done.returncode == 2 and "batch_size" in done.stderr


def test_classify_command_prints_valid_json(category_count: int) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", "classify", "What is 5 + 3?", "--with-probabilities"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert_valid_classification(result, category_count)
    assert result["category"] == "math" and result["use_reasoning"] is False
    assert re.search(r"category index built", done.stderr)


def test_missing_categories_file_exits_with_a_clear_error(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", "classify", "hi", "--categories-file", str(tmp_path / "none.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "cannot read categories file" in done.stderr
