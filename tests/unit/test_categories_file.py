"""The categories file: the packaged default, versions, and clear errors for bad files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mcp_classifier.classify.categories import CategoryFileError, load_categories

DEFAULT_ORDER = ["math", "science", "technology", "history", "general"]


def test_default_file_has_the_five_categories_in_order_with_enough_examples() -> None:
    config = load_categories()
    assert config.names == DEFAULT_ORDER
    for category in config.categories:
        assert len(category.examples) >= 30, category.name
        assert category.description and category.system_prompt, category.name
        assert len(set(category.examples)) == len(category.examples), f"duplicate examples in {category.name}"


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "categories.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _small() -> dict:
    return {
        "categories": [
            {"name": "a", "description": "first", "examples": ["one", "two"]},
            {"name": "b", "description": "second", "examples": ["three"], "model": "m-b"},
        ],
        "policy": {"default_model": "m-default"},
    }


def test_category_version_changes_with_examples_but_not_with_policy(tmp_path: Path) -> None:
    base = load_categories(_write(tmp_path, _small()))
    more = _small()
    more["categories"][0]["examples"].append("four")
    changed_examples = load_categories(_write(tmp_path, more))
    policy = _small()
    policy["policy"]["default_model"] = "m-other"
    changed_policy = load_categories(_write(tmp_path, policy))
    assert changed_examples.category_set_version != base.category_set_version
    assert changed_policy.category_set_version == base.category_set_version
    assert changed_policy.policy_version != base.policy_version


def test_json_file_is_accepted(tmp_path: Path) -> None:
    import json

    path = tmp_path / "c.json"
    path.write_text(json.dumps(_small()))
    assert load_categories(path).names == ["a", "b"]


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("categories: [", "not valid YAML"),
        ("- just a list", "mapping at the top level"),
        ("categories:\n  - name: a\n    examples: [x]\n  - name: a\n    examples: [y]\n", "duplicate category names"),
        ("categories:\n  - name: a\n    examples: [x]\n  - name: b\n    colour: red\n", "colour"),
        ("categories:\n  - name: only\n    examples: [x]\n", "categories"),
    ],
)
def test_bad_files_raise_a_clear_error(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(CategoryFileError) as info:
        load_categories(path)
    assert str(path) in str(info.value) and fragment in str(info.value)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(CategoryFileError, match="cannot read"):
        load_categories(tmp_path / "nope.yaml")
