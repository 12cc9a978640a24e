"""The settings, in typed groups: CLI flags and env vars map onto them by flat name, and docs/configuration.md matches them."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from mcp_classifier.cli import build_parser, settings_from_args
from mcp_classifier.settings import ENV_PREFIX, SETTINGS_GROUPS, Settings, settings_fields
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
    assert set(rows) == set(settings_fields()), "docs/configuration.md and the settings differ"
    for name, field in settings_fields().items():
        _, env, flag, default, _ = rows[name]
        assert env == f"`{ENV_PREFIX}{name.upper()}`"
        assert flag == f"`--{name.replace('_', '-')}`"
        expected = "(unset)" if field.default is None else f"`{field.default}`"
        assert default == expected, f"{name}: the reference says {default}, settings say {expected}"


def test_every_setting_sits_in_exactly_one_group() -> None:
    grouped = [name for group in SETTINGS_GROUPS for name in group.fields]
    assert sorted(grouped) == sorted(settings_fields())


def _help(command: str, flag: str) -> str:
    return subprocess.run([sys.executable, "-m", "mcp_classifier.cli", command, flag], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("command", ["serve", "stdio", "classify"])
def test_every_setting_is_a_flag_of_every_command_and_help_all_lists_it(command: str) -> None:
    help_text = _help(command, "--help-all")
    for name in settings_fields():
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
        description = settings_fields()[name].description or ""
        first_sentence = re.split(r"\.\s+(?=[A-Z])", description, maxsplit=1)[0].rstrip(".")
        assert re.sub(r"\s+", "", first_sentence) in squeezed, f"--{name}: its first sentence is not shown whole"


def test_flags_override_env_which_overrides_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{ENV_PREFIX}PORT", "9123")
    monkeypatch.setenv(f"{ENV_PREFIX}BATCH_SIZE", "7")
    args = build_parser().parse_args(["serve", "--port", "9555", "--max-text-length", "100"])
    settings = settings_from_args(args)
    assert (settings.serving.port, settings.batching.batch_size, settings.serving.max_text_length) == (9555, 7, 100)
    assert settings.model.name == "builtin:minilm"


# ---- the groups ------------------------------------------------------------------------------
def test_the_settings_class_holds_groups_only_and_few_of_them() -> None:
    assert len(Settings.model_fields) <= 15
    assert [group.name for group in SETTINGS_GROUPS] == list(Settings.model_fields)


def test_env_vars_keep_their_flat_names_and_land_in_their_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "MODEL": "random:qwen3-embedding-0.6b",  # also the model group's name: read as the model id, not as JSON
        "CACHE": "false",  # likewise the cache group's
        "REDIS_URL": "redis://cache:6379/0",
        "SERVED_LANGUAGES": "en,de",
        "PORT": "9123",
        "BATCH_SIZE": "7",
        "TOOL_THRESHOLD": "0.25",
        "RAY_NUM_CPUS": "3",
        "TORCH_THREADS": "2",
        "ALLOWED_HOSTS": "*",
    }
    for name, value in env.items():
        monkeypatch.setenv(f"{ENV_PREFIX}{name}", value)
    settings = Settings()
    assert (settings.model.name, settings.cache.enabled) == ("random:qwen3-embedding-0.6b", False)
    assert settings.cache.redis_url is not None and settings.cache.redis_url.get_secret_value() == "redis://cache:6379/0"
    assert (settings.categories.served_languages, settings.serving.port, settings.batching.batch_size) == ("en,de", 9123, 7)
    assert (settings.toolfilter.tool_threshold, settings.ray.ray_num_cpus, settings.engine.torch_threads) == (0.25, 3, 2)
    assert settings.edge.allowed_hosts == "*"
    assert {name: settings.value(name.lower()) for name in ("PORT", "BATCH_SIZE")} == {"PORT": 9123, "BATCH_SIZE": 7}


def test_a_flag_merges_into_its_group_beside_the_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """--no-cache with the Redis URL in the env (the chart's way): the flag changes one field, not the whole group."""
    monkeypatch.setenv(f"{ENV_PREFIX}REDIS_URL", "redis://cache:6379/0")
    monkeypatch.setenv(f"{ENV_PREFIX}MODEL_REVISION", "main")
    settings = settings_from_args(build_parser().parse_args(["serve", "--no-cache", "--model", "builtin:minilm"]))
    assert settings.cache.enabled is False and settings.cache.redis_url is not None
    assert (settings.model.name, settings.model.model_revision) == ("builtin:minilm", "main")


def test_flat_keywords_and_nested_groups_build_the_same_settings() -> None:
    flat = Settings(batch_size=2, port=0, model="random:qwen3-embedding-0.6b", cache=False, api_keys="k", unknown_setting=1)
    nested = Settings(
        batching={"batch_size": 2},
        serving={"port": 0},
        model={"name": "random:qwen3-embedding-0.6b"},
        cache={"enabled": False},
        edge={"api_keys": "k"},
    )
    assert flat == nested
    assert (flat.batching.batch_size, flat.serving.port, flat.model.name, flat.cache.enabled) == (
        2,
        0,
        "random:qwen3-embedding-0.6b",
        False,
    )
    mixed = Settings(serving={"port": 1, "host": "0.0.0.0"}, port=2)  # a flat name beside its group: applied on top
    assert (mixed.serving.port, mixed.serving.host) == (2, "0.0.0.0")


def test_model_dump_round_trips() -> None:
    settings = Settings(batch_size=3, host="0.0.0.0", categories_file="/tmp/c.yaml", redis_url="redis://r:6379", tool_threshold=0.2)
    assert Settings(**settings.model_dump()) == settings
    assert Settings.model_validate(settings.model_dump()) == settings
    no_secrets = Settings(batch_size=3, host="0.0.0.0", categories_file="/tmp/c.yaml", tool_threshold=0.2)
    assert Settings.model_validate_json(no_secrets.model_dump_json()) == no_secrets  # how --model-processes children get theirs


def test_invalid_values_are_refused_by_flat_name_too() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        Settings(batch_size=0)


def test_with_values_changes_settings_by_flat_name_and_leaves_the_original() -> None:
    settings = Settings()
    changed = settings.with_values(port=1, torch_threads=2, cache=False)
    assert (changed.serving.port, changed.engine.torch_threads, changed.cache.enabled) == (1, 2, False)
    assert (settings.serving.port, settings.engine.torch_threads, settings.cache.enabled) == (8080, 0, True)
    assert changed.batching is settings.batching  # groups not named are shared


def test_log_level_counts_as_given_from_a_flag_or_the_env_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "log_level" not in Settings().serving.model_fields_set
    assert "log_level" in Settings(log_level="debug").serving.model_fields_set
    monkeypatch.setenv(f"{ENV_PREFIX}LOG_LEVEL", "error")
    assert "log_level" in Settings().serving.model_fields_set


def test_help_all_lists_each_groups_flags_in_group_order() -> None:
    help_text = _help("serve", "--help-all")
    options = [m.group(1) for m in re.finditer(r"^  (--[a-z0-9-]+)", help_text, re.MULTILINE)]
    flags = ["--" + name.replace("_", "-") for group in SETTINGS_GROUPS for name in group.fields]
    assert [option for option in options if option in flags] == flags
    titles = [help_text.index(f"{group.title} (env:") for group in SETTINGS_GROUPS]
    assert titles == sorted(titles)
