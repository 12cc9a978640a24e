"""Classification results and classifier info: plain data, no torch, so the gateway imports them freely."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .categories import CategoryConfig


@dataclass(frozen=True)
class ClassificationResult:
    """Always carries the probabilities, so one cached entry serves both with_probabilities forms."""

    class_index: int
    category: str
    confidence: float
    model: str
    use_reasoning: bool
    probabilities: tuple[float, ...]
    entropy: float

    def to_public(self, with_probabilities: bool) -> dict[str, Any]:
        """The classify_text JSON (DESIGN §3)."""
        out: dict[str, Any] = {
            "class": self.class_index,
            "category": self.category,
            "confidence": self.confidence,
            "model": self.model,
            "use_reasoning": self.use_reasoning,
        }
        if with_probabilities:
            out["probabilities"] = list(self.probabilities)
            out["entropy"] = self.entropy
        return out

    def to_dict(self) -> dict[str, Any]:
        return self.to_public(with_probabilities=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClassificationResult:
        return cls(
            class_index=int(data["class"]),
            category=str(data["category"]),
            confidence=float(data["confidence"]),
            model=str(data["model"]),
            use_reasoning=bool(data["use_reasoning"]),
            probabilities=tuple(float(p) for p in data["probabilities"]),
            entropy=float(data["entropy"]),
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
