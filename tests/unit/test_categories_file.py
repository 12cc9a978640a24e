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


# ---- a refused file is explained in the file's own terms ------------------------------------------
def _refusal(tmp_path: Path, data: dict | str) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(CategoryFileError) as info:
        load_categories(path)
    message = str(info.value)
    assert str(path) in message
    for pydantic_words in ("errors.pydantic.dev", "http", "Tuple", "after validation", "input_value", "type="):
        assert pydantic_words not in message, message
    return message


def test_a_file_with_one_category_says_it_needs_two(tmp_path: Path) -> None:
    message = _refusal(tmp_path, {"categories": [{"name": "only", "examples": ["x"]}]})
    assert "needs at least 2 categories" in message and "it has 1 ('only')" in message, message


def test_a_bad_category_among_two_is_named_and_the_count_is_not_blamed(tmp_path: Path) -> None:
    data = _small()
    data["categories"][1]["threshold"] = 3
    data["categories"][0]["use_reasoning"] = "maybe"
    message = _refusal(tmp_path, data)
    assert "category 'b', field 'threshold': must be a number from -1 to 1, not 3" in message, message
    assert "category 'a', field 'use_reasoning': must be true or false, not 'maybe'" in message, message
    assert "at least 2" not in message, message


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["categories"][1].update(colour="red"), ["category 'b': unknown field 'colour'", "name, description"]),
        (lambda d: d["categories"][0].update(examples=["one", "  "]), ["category 'a', field 'examples': example 2 is blank"]),
        (lambda d: d["categories"][0].update(examples="one"), ["category 'a', field 'examples': must be a list of texts"]),
        (lambda d: d["categories"][1].update(name=""), ["category 2 (by position), field 'name': must have visible text"]),
        (lambda d: d["categories"][1].update(name="  "), ["category 2 (by position), field 'name': must have visible text"]),
        (
            lambda d: d["policy"].update(low_confidence={"threshold": 2}),
            ["field 'policy.low_confidence.threshold': must be a number from 0 to 1"],
        ),
        (lambda d: d.update(categorys=d.pop("categories")), ["field 'categories' is missing", "unknown field 'categorys'"]),
    ],
    ids=["unknown-field", "blank-example", "examples-not-a-list", "empty-name", "blank-name", "policy-range", "misspelt-categories"],
)
def test_each_problem_names_the_category_the_field_and_what_is_allowed(tmp_path: Path, change, words: list[str]) -> None:
    data = _small()
    change(data)
    message = _refusal(tmp_path, data)
    for fragment in words:
        assert fragment in message, message


def test_an_empty_file_says_it_is_empty(tmp_path: Path) -> None:
    message = _refusal(tmp_path, "")
    assert "is empty" in message and "must hold a mapping" in message and "categories" in message, message
