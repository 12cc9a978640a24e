"""One settings object: CLI flags and env vars map onto it, and docs/configuration.md matches it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from mcp_classifier.cli import build_parser, settings_from_args
from mcp_classifier.settings import ENV_PREFIX, SETTINGS_GROUPS, Settings
from tests.support import REPO_ROOT


def _reference_rows() -> dict[str, list[str]]:
    text = (REPO_ROOT / "docs" / "configuration.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells
    return rows


def test_the_configuration_reference_lists_every_setting_with_its_env_flag_and_default() -> None:
    rows = _reference_rows()
    assert set(rows) == set(Settings.model_fields), "docs/configuration.md and Settings fields differ"
    for name, field in Settings.model_fields.items():
        _, env, flag, default, _ = rows[name]
        assert env == f"`{ENV_PREFIX}{name.upper()}`"
        assert flag == f"`--{name.replace('_', '-')}`"
        expected = "(unset)" if field.default is None else f"`{field.default}`"
        assert default == expected, f"{name}: the reference says {default}, settings say {expected}"


def test_every_setting_sits_in_exactly_one_group() -> None:
    grouped = [name for group in SETTINGS_GROUPS for name in group.fields]
    assert sorted(grouped) == sorted(Settings.model_fields)


def _help(command: str, flag: str) -> str:
    return subprocess.run([sys.executable, "-m", "mcp_classifier.cli", command, flag], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("command", ["serve", "stdio", "classify"])
def test_every_setting_is_a_flag_of_every_command_and_help_all_lists_it(command: str) -> None:
    help_text = _help(command, "--help-all")
    for name in Settings.model_fields:
        assert f"--{name.replace('_', '-')}" in help_text, f"{command} lacks --{name}"
    hidden = next(group for group in SETTINGS_GROUPS if not group.common)
    flag = "--" + hidden.fields[0].replace("_", "-")
    value = "2" if hidden.fields[0] == "batch_size" else "1"
    assert build_parser().parse_args([command, flag, value, *(["text"] if command == "classify" else [])])


def test_help_shows_the_common_groups_only_and_says_where_the_rest_are() -> None:
    help_text = _help("serve", "--help")
    common = [name for group in SETTINGS_GROUPS if group.common for name in group.fields]
    advanced = [name for group in SETTINGS_GROUPS if not group.common for name in group.fields]

    def listed(name: str) -> bool:
        return re.search(rf"--{name.replace('_', '-')}(?![\w-])", help_text) is not None

    assert all(listed(name) for name in common)
    assert not any(listed(name) for name in advanced)
    assert "--help-all" in help_text and "docs/configuration.md" in help_text


@pytest.mark.parametrize("flag", ["--help", "--help-all"])
def test_help_shows_each_settings_whole_first_sentence_and_cuts_no_line(flag: str) -> None:
    """A cut line ("...") hid what a setting does; help wraps lines instead (compared without whitespace)."""
    help_text = _help("serve", flag)
    assert not [line for line in help_text.splitlines() if line.rstrip().endswith("...")]
    squeezed = re.sub(r"\s+", "", help_text)
    shown = [name for group in SETTINGS_GROUPS if group.common or flag == "--help-all" for name in group.fields]
    for name in shown:
        description = Settings.model_fields[name].description or ""
        first_sentence = re.split(r"\.\s+(?=[A-Z])", description, maxsplit=1)[0].rstrip(".")
        assert re.sub(r"\s+", "", first_sentence) in squeezed, f"--{name}: its first sentence is not shown whole"


def test_flags_override_env_which_overrides_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{ENV_PREFIX}PORT", "9123")
    monkeypatch.setenv(f"{ENV_PREFIX}BATCH_SIZE", "7")
    args = build_parser().parse_args(["serve", "--port", "9555", "--max-text-length", "100"])
    settings = settings_from_args(args)
    assert (settings.port, settings.batch_size, settings.max_text_length) == (9555, 7, 100)
    assert settings.model == "builtin:minilm"
