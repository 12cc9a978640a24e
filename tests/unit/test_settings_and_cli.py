"""One settings object: CLI flags and env vars map onto it, and the README's reference matches it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mcp_classifier.cli import build_parser, settings_from_args
from mcp_classifier.settings import ENV_PREFIX, Settings
from tests.support import REPO_ROOT


def _readme_rows() -> dict[str, list[str]]:
    text = (REPO_ROOT / "README.md").read_text()
    section = text.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    return rows


def test_readme_config_reference_lists_every_setting_with_its_env_flag_and_default() -> None:
    rows = _readme_rows()
    assert set(rows) == set(Settings.model_fields), "README table and Settings fields differ"
    for name, field in Settings.model_fields.items():
        _, env, flag, default, _ = rows[name]
        assert env == f"`{ENV_PREFIX}{name.upper()}`"
        assert flag == f"`--{name.replace('_', '-')}`"
        expected = "(unset)" if field.default is None else f"`{field.default}`"
        assert default == expected, f"{name}: README says {default}, settings say {expected}"


@pytest.mark.parametrize("command", ["serve", "stdio", "classify"])
def test_every_setting_is_a_flag_of_every_command(command: str) -> None:
    help_text = subprocess.run(
        [sys.executable, "-m", "mcp_classifier.cli", command, "--help"], capture_output=True, text=True, check=True
    ).stdout
    for name in Settings.model_fields:
        assert f"--{name.replace('_', '-')}" in help_text, f"{command} lacks --{name}"


def test_flags_override_env_which_overrides_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{ENV_PREFIX}PORT", "9123")
    monkeypatch.setenv(f"{ENV_PREFIX}BATCH_SIZE", "7")
    args = build_parser().parse_args(["serve", "--port", "9555", "--max-text-length", "100"])
    settings = settings_from_args(args)
    assert (settings.port, settings.batch_size, settings.max_text_length) == (9555, 7, 100)
    assert settings.model == "builtin:minilm"
