"""Classification results and classifier info: plain data, no torch, so the gateway imports them freely."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .categories import CategoryConfig
from .scope_stats import ScopeStats


@dataclass(frozen=True)
class Revision:
    """Who decided an answer: the model, and the versions of the category set and the routing policy."""

    model_id: str = ""
    category_set_version: str = ""
    policy_version: str = ""

    def to_public(self) -> dict[str, str]:
        return {"model_id": self.model_id, "category_set_version": self.category_set_version, "policy_version": self.policy_version}


@dataclass(frozen=True)
class ClassificationResult:
    """Always carries the probabilities, so one cached entry serves both with_probabilities forms.

    ``category`` names the nearest category even when ``in_scope`` is false, so old clients keep working;
    ``confidence`` is the probability that the answer is right, low for a query that fits no category.
    """

    class_index: int
    category: str
    confidence: float
    model: str
    use_reasoning: bool
    probabilities: tuple[float, ...]
    entropy: float  # nats
    in_scope: bool = True
    labels: tuple[str, ...] = ()  # every category the query passes, main first; empty when out of scope
    margin: float = 1.0  # top probability minus the runner-up's
    revision: Revision = Revision()
    # ISO 639-1 where the detector is at least language_min_confidence sure, else "und"; "" from a replica that predates it
    language: str = ""
    language_served: bool = True  # False: the model does not read the query's language, so in_scope is false too
    # Per category, an independent probability that the query is about it (the out-of-scope model read at that
    # category, times the probability that its language is served); only for a file with multi_label: true.
    label_scores: tuple[float, ...] = ()

    @property
    def entropy_bits(self) -> float:
        return self.entropy / math.log(2)

    @property
    def scope_probability(self) -> float:
        """The probability that the query fits the categories at all (in scope, in a language the model reads).

        Read back from ``confidence``, which is the category's probability times this one (docs/categories.md), so
        every answer has it, whichever backend, replica version or cache entry it came from."""
        top = self.probabilities[self.class_index] if 0 <= self.class_index < len(self.probabilities) else 0.0
        return min(1.0, max(0.0, self.confidence / top)) if top > 0.0 else 1.0

    def to_public(self, with_probabilities: bool) -> dict[str, Any]:
        """The classify_text JSON (docs/protocol.md, "Tools")."""
        out: dict[str, Any] = {
            "class": self.class_index,
            "category": self.category,
            "confidence": self.confidence,
            "model": self.model,
            "use_reasoning": self.use_reasoning,
            "in_scope": self.in_scope,
            "labels": list(self.labels),
            "margin": self.margin,
            "language": self.language,
            "language_served": self.language_served,
        }
        if with_probabilities:
            out["probabilities"] = list(self.probabilities)
            out["entropy"] = self.entropy
            out["entropy_bits"] = self.entropy_bits
        out["_meta"] = self.revision.to_public()
        return out

    def to_dict(self) -> dict[str, Any]:
        """Everything, for the cache: the public answer with probabilities, and the label scores where there are any."""
        out = self.to_public(with_probabilities=True)
        if self.label_scores:
            out["label_scores"] = list(self.label_scores)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClassificationResult:
        meta = data.get("_meta") or {}
        return cls(
            class_index=int(data["class"]),
            category=str(data["category"]),
            confidence=float(data["confidence"]),
            model=str(data["model"]),
            use_reasoning=bool(data["use_reasoning"]),
            probabilities=tuple(float(p) for p in data["probabilities"]),
            entropy=float(data["entropy"]),
            in_scope=bool(data.get("in_scope", True)),
            labels=tuple(str(label) for label in data.get("labels", ())),
            margin=float(data.get("margin", 1.0)),
            revision=Revision(**{k: str(v) for k, v in meta.items() if k in Revision.__dataclass_fields__}),
            language=str(data.get("language", "")),
            language_served=bool(data.get("language_served", True)),
            label_scores=tuple(float(s) for s in data.get("label_scores", ())),
        )


@dataclass(frozen=True)
class ClassifierInfo:
    model_id: str
    device: str
    dtype: str
    pooling: str
    categories: CategoryConfig
    category_set_version: str
    policy_version: str
    index_size: int
    temperature: float
    loo_accuracy: float
    reload_error: str | None = None  # the last categories file that was refused, and why
    scoring: str = ""  # what the scorer fitted on this file is: auto's pick, "+bm25" with word matches
    scope: ScopeStats | None = None  # the fitted out-of-scope thresholds and what they are expected to do
    served_languages: tuple[str, ...] = ()  # empty: every language
    language_min_confidence: float = 1.0

    @property
    def languages_public(self) -> dict[str, Any]:
        """/health's and list_categories' ``languages``."""
        return {"served": list(self.served_languages), "min_confidence": self.language_min_confidence}

    @property
    def language_policy(self) -> str:
        """What decides language and language_served, in a cache key's words: a change must not read answers cached
        before it. The confidence decides whether a language is named even where every language is served."""
        return f"{','.join(self.served_languages) or 'any'}@{self.language_min_confidence:g}"
