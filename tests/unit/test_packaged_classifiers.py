"""The packaged example classifiers (complexity, prompt_guard): they load through the categories loader, carry the
labels routers read, in order, and ship in the wheel."""

from __future__ import annotations

import glob
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from mcp_classifier.classify.categories import load_categories

CLASSIFIERS = resources.files("mcp_classifier.data").joinpath("classifiers")
EXPECTED = {
    # the vLLM Semantic Router's complexity signal reads these three levels (label_distribution.v1)
    "complexity.yaml": ["easy", "medium", "hard"],
    # its jailbreak signal reads positive_labels: [jailbreak]
    "prompt_guard.yaml": ["benign", "jailbreak"],
}
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_packaged_classifier_loads_with_its_labels_in_order(name: str) -> None:
    with resources.as_file(CLASSIFIERS.joinpath(name)) as path:
        config = load_categories(path)
    assert config.names == EXPECTED[name]
    # every query is one of the labels; the router wants exactly these labels, once each, summing to 1: no
    # fallback label beside them and no independent per-label scores
    assert config.detect_out_of_scope is False
    assert config.fallback_label is None
    assert config.multi_label is False
    for category in config.categories:
        assert len(category.examples) >= 30, category.name
        assert category.description, category.name
        assert len(set(category.examples)) == len(category.examples), f"duplicate examples in {name}: {category.name}"


def test_complexity_routes_hard_queries_to_reasoning_and_easy_ones_without() -> None:
    with resources.as_file(CLASSIFIERS.joinpath("complexity.yaml")) as path:
        config = load_categories(path)
    by_name = {c.name: c for c in config.categories}
    assert by_name["hard"].use_reasoning is True
    assert by_name["easy"].use_reasoning is False
    # the label is the complexity judgment: the policy's word-count and keyword rule stays out of the way
    assert config.policy.complexity.reasoning_markers == ()


def test_every_packaged_classifier_file_is_in_the_wheels_package_data() -> None:
    globs = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["package-data"]["mcp_classifier"]
    shipped = sorted(entry.name for entry in CLASSIFIERS.iterdir() if entry.name.endswith(".yaml"))
    assert shipped == sorted(EXPECTED)
    package = REPO / "services" / "mcp_classifier"
    # setuptools expands each pattern as glob does, relative to the package: '*' stays within one folder
    matched = {Path(hit).relative_to(package).as_posix() for pattern in globs for hit in glob.glob(str(package / pattern))}
    for name in shipped:
        assert f"data/classifiers/{name}" in matched, name
