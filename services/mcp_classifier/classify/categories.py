"""The categories file: categories, their examples and the routing policy, plus content-hash versions."""

from __future__ import annotations

import hashlib
import json
import typing
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

DEFAULT_INSTRUCTION = "Given a user query, identify which topic category it belongs to"
# Part of every category-set version and of the start cache's key for the out-of-scope fit: raised whenever the
# same file gets other answers (the fit of in_scope, what an answer reports: a small category's pooled prior,
# language named only at the detector's confidence, a broad file's answers read against its typical one) or the fit
# reports more (its examples' typical in-scope probability), so entries cached before never serve a query again.
SCOPE_FORMAT = 4
MIN_CATEGORIES = 2  # a query is classified among the categories: with one, every answer would be that one


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Category(_Strict):
    name: str
    description: str = ""
    system_prompt: str = ""
    model: str | None = None
    use_reasoning: bool = False
    examples: tuple[str, ...] = ()
    # The similarity to this category's examples at which a query is as likely in scope as not: set here, it
    # replaces the threshold fitted from the examples (see /health's scope for the fitted ones).
    threshold: float | None = Field(None, ge=-1.0, le=1.0)

    @field_validator("name")
    @classmethod
    def _visible_name(cls, value: str) -> str:
        """An empty name and a blank one are one mistake, so one message (a length rule would word the empty one apart)."""
        if not value.strip():
            raise ValueError("must have visible text")
        return value

    @field_validator("examples")
    @classmethod
    def _no_blank_examples(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        blank = [i + 1 for i, e in enumerate(value) if not e.strip()]
        if blank:
            raise ValueError(f"example {', '.join(map(str, blank))} is blank: every example needs visible text")
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
    categories: tuple[Category, ...] = Field(min_length=MIN_CATEGORIES)
    policy: RoutingPolicyConfig = RoutingPolicyConfig()
    # Queries this deployment does not serve, written by the user: more negatives for the out-of-scope fit.
    out_of_scope_examples: tuple[str, ...] = ()
    # The category whose model and reasoning an out-of-scope answer takes (its name still says the nearest one).
    fallback: str | None = None
    # false: every query is in scope, for a file whose categories between them take anything (a catch-all
    # "general" category, as the packaged default has); confidence is then the category's probability alone.
    detect_out_of_scope: bool = True
    # POST /classify (the vLLM Semantic Router's remote classifier): a label that is not a category and carries the
    # probability that the query fits none of them; without it the router sees the categories only.
    fallback_label: str | None = None
    # POST /classify answers an independent score per label (the out-of-scope model read at each category) rather
    # than one distribution that sums to 1.
    multi_label: bool = False

    @field_validator("fallback_label")
    @classmethod
    def _visible_fallback_label(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must have visible text (it names the label that carries the out-of-scope share)")
        return value

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
        blank = [i + 1 for i, e in enumerate(self.out_of_scope_examples) if not e.strip()]
        if blank:
            raise ValueError(f"out_of_scope_examples: item {', '.join(map(str, blank))} is blank: every example needs visible text")
        if self.fallback_label is not None and self.fallback_label in names:
            raise ValueError(
                f"fallback_label {self.fallback_label!r} is the name of a category: it names the label that carries the "
                f"share of queries that fit no category, so it must differ from every category {names}"
            )
        if self.multi_label and not self.detect_out_of_scope:
            raise ValueError(
                "multi_label: true needs detect_out_of_scope: true: each label's own score is the out-of-scope model "
                "read at that category, and detect_out_of_scope: false fits no such model"
            )
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
        if self.fallback_label is not None or self.multi_label:  # the labels POST /classify answers, and their scores
            payload["labels"] = {"fallback_label": self.fallback_label, "multi_label": self.multi_label}
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
        empty = "is empty: it " if raw is None else ""
        raise CategoryFileError(f"categories file {source} {empty}must hold a mapping at the top level ({_fields_of(CategoryConfig)})")
    try:
        return CategoryConfig.model_validate(raw)
    except ValidationError as exc:
        raise CategoryFileError(f"categories file {source} is invalid: {explain_validation(exc, raw)}") from None
    except ValueError as exc:
        raise CategoryFileError(f"categories file {source} is invalid: {exc}") from exc


# ---- validation errors in the file's own terms ----------------------------------------------------
# pydantic's text names its own types ("Tuple should have at least 2 items after validation, not 0") and links
# to its docs; a user editing YAML needs the category, the field and what the field takes.
MAX_EXPLAINED = 5  # problems named in one message: a reload error is one line in /health and the log

_KINDS = {
    "string_type": "text",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "tuple_type": "a list",
    "list_type": "a list",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
}
_BOUND_TYPES = frozenset({"greater_than_equal", "less_than_equal", "greater_than", "less_than"})


def explain_validation(exc: ValidationError, raw: dict[str, Any]) -> str:
    """Each problem as "where: what is wrong, what is allowed", in the file's words, without pydantic's help URLs."""
    errors = exc.errors(include_url=False)
    problems: list[str] = []
    for error in errors:
        if error["type"] == "too_short" and tuple(error["loc"]) == ("categories",):
            given = raw.get("categories")
            if isinstance(given, list) and len(given) >= MIN_CATEGORIES:
                continue  # pydantic counts only the categories that validated: the bad ones are named on their own
            problems.append(_too_few_categories(given))
            continue
        message = _explain_one(error, raw)
        if message not in problems:
            problems.append(message)
    shown = "; ".join(problems[:MAX_EXPLAINED])
    more = len(problems) - MAX_EXPLAINED
    return f"{shown}; and {more} more problem(s)" if more > 0 else shown


def _too_few_categories(given: object) -> str:
    entries = given if isinstance(given, list) else []
    names = [repr(e["name"]) for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)]
    has = f"{len(entries)} ({', '.join(names)})" if names else str(len(entries) or "none")
    return f"the file needs at least {MIN_CATEGORIES} categories (a query is classified among them); it has {has}"


def _explain_one(error: ErrorDetails, raw: dict[str, Any]) -> str:
    loc = tuple(error["loc"])
    kind = error["type"]
    value = error["input"]
    where = _where(loc, raw)
    if kind == "missing":
        return f"{where} is missing; it is required" if where else "a required field is missing"
    if kind == "extra_forbidden":
        owner = _where(loc[:-1], raw) or "the file"
        return f"{owner}: unknown field {loc[-1]!r} ({_fields_of(_model_at(loc[:-1]))})"
    if kind == "value_error":  # our own validators: their text already speaks the file's terms
        text = str((error.get("ctx") or {}).get("error", error["msg"]))
        return f"{where}: {text}" if where else text
    if kind in ("string_too_short", "too_short"):
        return f"{where}: must not be empty"
    if kind in _BOUND_TYPES:
        field = _field_at(loc)
        number = "a whole number" if field is not None and field.annotation is int else "a number"
        return f"{where}: must be {number} {_range(field)}, not {_value(value)}"
    if kind in _KINDS:
        return f"{where}: must be {_allowed(loc, kind)}, not {_value(value)}"
    return f"{where}: {error['msg']}" if where else error["msg"]


def _where(loc: tuple[int | str, ...], raw: dict[str, Any]) -> str:
    """A location as the file's reader finds it: the category by name (or position), then the field."""
    if not loc:
        return ""
    if loc[0] == "categories" and len(loc) >= 2 and isinstance(loc[1], int):
        given = raw.get("categories")
        entry = given[loc[1]] if isinstance(given, list) and loc[1] < len(given) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        category = f"category {name!r}" if isinstance(name, str) and name.strip() else f"category {loc[1] + 1} (by position)"
        rest = loc[2:]
        if not rest:
            return category
        field = f"{category}, field {rest[0]!r}"
        return f"{field}, item {rest[1] + 1}" if len(rest) > 1 and isinstance(rest[1], int) else field
    names = [str(part) if isinstance(part, str) else f"item {part + 1}" for part in loc]
    return f"field {'.'.join(names)!r}"


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model whose fields are at ``loc`` (CategoryConfig at the top, Category inside categories)."""
    model: type[BaseModel] | None = CategoryConfig
    for part in loc:
        if isinstance(part, int):
            continue  # an item of a list of models: the same model
        if model is None or part not in model.model_fields:
            return None
        model = _model_of(model.model_fields[part])
    return model


def _field_at(loc: tuple[int | str, ...]) -> FieldInfo | None:
    names = [i for i, part in enumerate(loc) if isinstance(part, str)]
    if not names:
        return None
    model = _model_at(loc[: names[-1]])
    return model.model_fields.get(str(loc[names[-1]])) if model is not None else None


def _model_of(field: FieldInfo) -> type[BaseModel] | None:
    annotation = field.annotation
    inner = typing.get_args(annotation)[0] if typing.get_origin(annotation) is tuple else annotation
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def _fields_of(model: type[BaseModel] | None) -> str:
    if model is None:
        return "no fields here"
    kind = {CategoryConfig: "the file's", Category: "a category's"}.get(model, "its")
    return f"{kind} fields are {', '.join(model.model_fields)}"


def _allowed(loc: tuple[int | str, ...], kind: str) -> str:
    """What the field takes: a list of what, a mapping with which fields."""
    field = _field_at(loc)
    if kind in ("tuple_type", "list_type") and field is not None:
        model = _model_of(field)
        return f"a list of {'categories (each a mapping with a name)' if model is Category else 'texts'}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        model = Category if loc[:1] == ("categories",) and isinstance(loc[-1], int) else (_model_of(field) if field else None)
        return f"a mapping ({_fields_of(model)})" if model is not None else "a mapping"
    return _KINDS[kind]


def _range(field: FieldInfo | None) -> str:
    bounds: dict[str, float] = {}
    for rule in field.metadata if field is not None else ():
        for name in ("ge", "gt", "le", "lt"):
            if getattr(rule, name, None) is not None:
                bounds[name] = getattr(rule, name)
    low, high = bounds.get("ge", bounds.get("gt")), bounds.get("le", bounds.get("lt"))
    if low is not None and high is not None:
        return f"from {low:g} to {high:g}"
    if low is not None:
        return f"{'of at least' if 'ge' in bounds else 'above'} {low:g}"
    return f"{'of at most' if 'le' in bounds else 'below'} {high:g}" if high is not None else "in range"


def _value(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return f"{value:g}"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    return {"list": "a list", "dict": "a mapping"}.get(type(value).__name__, type(value).__name__)
