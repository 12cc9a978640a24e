"""Category files derived from the packaged default, for reload and cache-version tests."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from . import REPO_ROOT

DEFAULT_FILE = REPO_ROOT / "services" / "mcp_classifier" / "data" / "default_categories.yaml"
FINANCE = {
    "name": "finance",
    "description": "Personal finance and investing: budgets, savings, loans, mortgages, credit scores, stocks, bonds, index funds, dividends, taxes and retirement accounts.",
    "system_prompt": "You are a careful personal-finance explainer; you do not give individual investment advice.",
    "model": "openai/gpt-oss-20b",
    "use_reasoning": False,
    "examples": [
        "how do index funds work",
        "should I pay off my credit card or invest first",
        "what is a good credit score",
        "how are stock dividends taxed",
        "fixed or variable mortgage rate, which is better",
        "what's the difference between a roth and a traditional ira",
        "how much should I keep in an emergency fund",
        "what are government bonds and how do they pay interest",
        "is it smart to refinance my car loan",
        "how does compound interest grow my retirement savings",
    ],
}
FINANCE_QUERY = "what is an exchange traded fund and how do its fees compare with a mutual fund"


def write_with_finance(path: Path) -> None:
    """The default categories plus a sixth, finance, written atomically over ``path``."""
    data = yaml.safe_load(DEFAULT_FILE.read_text())
    data["categories"].append(FINANCE)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False))
    os.replace(tmp, path)  # atomic, as editors and ConfigMap updates do


def write_default_with(path: Path, **top_level: object) -> Path:
    """The default categories with top-level keys set (``fallback_label="other"``, ``multi_label=True``), at ``path``."""
    data = yaml.safe_load(DEFAULT_FILE.read_text())
    data.update(top_level)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
