"""The categories file: categories, their examples and the routing policy, plus content-hash versions."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_INSTRUCTION = "Given a user query, identify which topic category it belongs to"
# Part of every category-set version: answers gained in_scope, and confidence its share, so entries cached
# before that never serve a query again.
SCOPE_FORMAT = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Category(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    system_prompt: str = ""
    model: str | None = None
    use_reasoning: bool = False
    examples: tuple[str, ...] = ()
    # The similarity to this category's examples at which a query is as likely in scope as not: set here, it
    # replaces the threshold fitted from the examples (see /health's scope for the fitted ones).
    threshold: float | None = Field(None, ge=-1.0, le=1.0)

    @field_validator("examples")
    @classmethod
    def _no_blank_examples(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not e.strip() for e in value):
            raise ValueError("examples must not be blank")
        return value


class LowConfidenceRule(_Strict):
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    model: str | None = None
    use_reasoning: bool = True


class ComplexityRule(_Strict):
    long_query_words: int = Field(28, ge=1)
    reasoning_markers: tuple[str, ...] = ()


class RoutingPolicyConfig(_Strict):
    default_model: str = "openai/gpt-oss-20b"
    low_confidence: LowConfidenceRule = LowConfidenceRule()
    complexity: ComplexityRule = ComplexityRule()


class CategoryConfig(_Strict):
    """A validated categories file. Category order defines class indices."""

    instruction: str = DEFAULT_INSTRUCTION
    categories: tuple[Category, ...] = Field(min_length=2)
    policy: RoutingPolicyConfig = RoutingPolicyConfig()
    # Queries this deployment does not serve, written by the user: more negatives for the out-of-scope fit.
    out_of_scope_examples: tuple[str, ...] = ()
    # The category whose model and reasoning an out-of-scope answer takes (its name still says the nearest one).
    fallback: str | None = None
    # false: every query is in scope, for a file whose categories between them take anything (a catch-all
    # "general" category, as the packaged default has); confidence is then the category's probability alone.
    detect_out_of_scope: bool = True

    @model_validator(mode="after")
    def _check_categories(self) -> CategoryConfig:
        names = [c.name for c in self.categories]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate category names: {duplicates}")
        for category in self.categories:
            if not category.examples and not category.description.strip():
                raise ValueError(f"category {category.name!r} needs examples or a description")
        if self.fallback is not None and self.fallback not in names:
            raise ValueError(f"fallback {self.fallback!r} is not one of the categories {names}")
        if any(not e.strip() for e in self.out_of_scope_examples):
            raise ValueError("out_of_scope_examples must not be blank")
        return self

    @property
    def fallback_index(self) -> int | None:
        return None if self.fallback is None else self.names.index(self.fallback)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.categories]

    @property
    def category_set_version(self) -> str:
        """Content hash of what changes classification; goes into cache keys and /health."""
        payload: dict[str, object] = {
            "instruction": self.instruction,
            "categories": [
                {"name": c.name, "description": c.description, "system_prompt": c.system_prompt, "examples": list(c.examples)}
                for c in self.categories
            ],
            "scope": SCOPE_FORMAT,
        }
        thresholds = [c.threshold for c in self.categories]
        if self.out_of_scope_examples or any(t is not None for t in thresholds) or not self.detect_out_of_scope:
            payload["out_of_scope"] = {
                "examples": list(self.out_of_scope_examples),
                "thresholds": thresholds,
                "detect": self.detect_out_of_scope,
            }
        return _digest(payload)

    @property
    def policy_version(self) -> str:
        """Content hash of what changes routing (model, use_reasoning) but not the category."""
        payload: dict[str, object] = {
            "policy": self.policy.model_dump(mode="json"),
            "per_category": [{"model": c.model, "use_reasoning": c.use_reasoning} for c in self.categories],
        }
        if self.fallback is not None:
            payload["fallback"] = self.fallback
        return _digest(payload)


def _digest(payload: object) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


class CategoryFileError(ValueError):
    """The categories file is missing, unparsable or invalid; the message says which and where."""


def load_categories(path: Path | str | None = None) -> CategoryConfig:
    """Load and validate a categories file (YAML or JSON); the packaged default when path is None."""
    if path is None:
        text = resources.files("mcp_classifier.data").joinpath("default_categories.yaml").read_text("utf-8")
        source = "<packaged default_categories.yaml>"
    else:
        source = str(path)
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise CategoryFileError(f"cannot read categories file {source}: {exc}") from exc
    import yaml  # here, not at the top: the web layers import this module for its types, before any file is read

    try:
        raw = yaml.safe_load(text)  # YAML is a superset of JSON, so one parser serves both
    except yaml.YAMLError as exc:
        raise CategoryFileError(f"categories file {source} is not valid YAML/JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise CategoryFileError(f"categories file {source} must hold a mapping at the top level")
    try:
        return CategoryConfig.model_validate(raw)
    except ValueError as exc:
        raise CategoryFileError(f"categories file {source} is invalid: {exc}") from exc
