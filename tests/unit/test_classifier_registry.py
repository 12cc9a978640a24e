"""The registry of classifiers: reads before the model loads, reloads a changed file, refuses a bad one and keeps
the live version, leaves the packaged default alone. No model: a stand-in classifier records what goes live."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mcp_classifier.classify.categories import CategoryConfig, CategoryFileError
from mcp_classifier.classify.registry import DEFAULT, PACKAGED, CategorySource, ClassifierRegistry, category_sources, reloadable_sources
from mcp_classifier.settings import Settings
from tests.support.categories import DEFAULT_FILE, write_with_finance


class StandIn:
    """What the registry asks of a classifier: its live config, ``apply`` and ``reload_error``."""

    def __init__(self, config: CategoryConfig) -> None:
        self.config = config
        self.reload_error: str | None = None
        self.applied = 0

    @property
    def versions(self) -> tuple[str, str]:
        return self.config.category_set_version, self.config.policy_version

    def apply(self, config: CategoryConfig) -> bool:
        if (config.category_set_version, config.policy_version) == self.versions:
            return False
        self.config, self.applied = config, self.applied + 1
        return True


def _registry(path: Path | None) -> ClassifierRegistry:
    return ClassifierRegistry.read(Settings(categories_file=path).categories).build(StandIn)


def test_the_settings_name_one_default_source_and_only_a_file_is_watched(tmp_path: Path) -> None:
    assert category_sources(Settings().categories) == {DEFAULT: CategorySource(None)}
    assert reloadable_sources(Settings().categories) == {}
    path = tmp_path / "categories.yaml"
    assert reloadable_sources(Settings(categories_file=path).categories) == {DEFAULT: CategorySource(path)}
    assert CategorySource(None).describe() == PACKAGED and CategorySource(path).describe() == str(path)


def test_a_bad_file_fails_when_read_before_anything_is_built(tmp_path: Path) -> None:
    path = tmp_path / "categories.yaml"
    path.write_text("categories: [")
    built: list[CategoryConfig] = []
    with pytest.raises(CategoryFileError, match="not valid YAML"):
        ClassifierRegistry.read(Settings(categories_file=path).categories).build(built.append)
    assert not built


def test_reload_puts_a_changed_file_live_and_refuses_a_bad_one_keeping_the_version(tmp_path: Path) -> None:
    path = tmp_path / "categories.yaml"
    shutil.copy(DEFAULT_FILE, path)
    registry = _registry(path)
    classifier = registry.get()
    first = registry.versions()
    assert registry.reload().changed is False and classifier.applied == 0  # same content: nothing rebuilt

    write_with_finance(path)
    reloaded = registry.reload()
    assert reloaded.changed and reloaded.error is None and registry.get() is classifier
    assert registry.config().names[-1] == "finance" and registry.versions() != first
    live = registry.versions()

    path.write_text("categories: [")
    refused = registry.reload()
    assert not refused.changed and refused.error is not None and "not valid YAML" in refused.error
    assert classifier.reload_error == refused.error and registry.versions() == live

    write_with_finance(path)  # fixed back to the live content: no change, and the refusal clears
    assert registry.reload().changed is False and classifier.reload_error is None


def test_the_packaged_default_is_never_re_read() -> None:
    registry = _registry(None)
    assert registry.source().reloadable is False
    assert registry.reload().changed is False and registry.get().applied == 0
    assert registry.watch(DEFAULT, lambda: None) is False, "nothing to watch"


def test_a_name_it_does_not_hold_says_which_it_does() -> None:
    registry = _registry(None)
    assert registry.names == (DEFAULT,)
    with pytest.raises(KeyError, match="no classifier named 'billing' \\(known: default\\)"):
        registry.get("billing")
