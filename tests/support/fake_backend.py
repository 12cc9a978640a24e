"""An in-process ClassificationBackend (and Reloadable) with no model: the unit floor's stand-in for the real one.

It answers from the packaged categories and the real routing policy, so every answer meets the
protocol's validation rules; the class is a stable hash of the text, because the unit tests check
envelopes, doors and edge rules, never what a model would say. Real-model behaviour is covered by
tests/integration and tests/e2e.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from mcp_classifier.backend.base import BackendError, BackendHealth, EmbeddingKind
from mcp_classifier.classify.categories import CategoryConfig, load_categories
from mcp_classifier.classify.registry import DEFAULT, UnknownClassifier
from mcp_classifier.classify.results import ClassificationResult, ClassifierInfo, Revision
from mcp_classifier.classify.routing import RoutingPolicy

TOP_PROBABILITY = 0.6  # the fake's confidence: well clear of the policy's low-confidence rule
EMBEDDING_DIMENSIONS = 256  # the fake's bag-of-words vectors: texts sharing words are similar


def bag_of_words_vector(text: str) -> np.ndarray:
    """A unit vector from hashed lowercase words: a stand-in embedding whose cosine tracks shared words."""
    vector = np.zeros(EMBEDDING_DIMENSIONS, dtype=np.float32)
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big") % EMBEDDING_DIMENSIONS] += 1.0
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


class FakeBackend:
    """Deterministic answers; counts what reaches it; ``fail_with`` makes every predict raise. ``classifiers``: more
    classifiers by name, each its own categories file, beside ``default`` (the categories file)."""

    def __init__(self, categories_file: Path | None = None, classifiers: Mapping[str, Path] | None = None) -> None:
        self.config: CategoryConfig = load_categories(categories_file)
        self.policy = RoutingPolicy(self.config)
        self.configs = {DEFAULT: self.config, **{name: load_categories(path) for name, path in (classifiers or {}).items()}}
        self.calls: list[list[str]] = []
        self.classifier_calls: list[str] = []  # the classifier each predict asked
        self.embed_calls: list[tuple[str, list[str]]] = []  # (kind, texts) of every embed call
        self.fail_with: BackendError | None = None
        self.scope_probability = 1.0  # what confidence carries beside the category's probability; under 0.5: out of scope
        self.started = False
        self.closed = False

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    async def health(self, *, need_info: bool = False) -> BackendHealth:
        infos = {name: self.classifier_info(name) if name != DEFAULT else self.classifier_info() for name in self.configs}
        return BackendHealth(ready=self.started and not self.closed and self.fail_with is None, info=infos[DEFAULT], classifiers=infos)

    async def reload_categories(self) -> bool:
        return False

    def classifier_info(self, classifier: str = DEFAULT) -> ClassifierInfo:
        """What health() says is served: the packaged categories (or the classifier's file) on a fake model."""
        config = self.configs[classifier] if classifier != DEFAULT else self.config
        return ClassifierInfo(
            model_id="fake-model",
            device="cpu",
            dtype="float32",
            pooling="mean",
            categories=config,
            category_set_version=config.category_set_version,
            policy_version=config.policy_version,
            index_size=sum(len(c.examples) for c in config.categories),
            temperature=1.0,
            loo_accuracy=1.0,
        )

    async def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> np.ndarray:
        self.embed_calls.append((kind, list(texts)))
        if self.fail_with is not None:
            raise self.fail_with
        return np.vstack([bag_of_words_vector(t) for t in texts]) if texts else np.zeros((0, EMBEDDING_DIMENSIONS), dtype=np.float32)

    async def predict(self, texts: Sequence[str], classifier: str = DEFAULT) -> list[ClassificationResult]:
        if classifier not in self.configs:
            raise UnknownClassifier(classifier, tuple(self.configs))
        self.calls.append(list(texts))
        self.classifier_calls.append(classifier)
        if self.fail_with is not None:
            raise self.fail_with
        return [self.answer(text) if classifier == DEFAULT else self.answer(text, classifier) for text in texts]

    def answer(self, text: str, classifier: str = DEFAULT) -> ClassificationResult:
        """What predict returns for ``text``: a stable class, TOP_PROBABILITY on it, the rest shared."""
        config = self.configs[classifier] if classifier != DEFAULT else self.config
        policy = self.policy if classifier == DEFAULT else RoutingPolicy(config)
        n = len(config.categories)
        cls = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big") % n
        rest = (1.0 - TOP_PROBABILITY) / (n - 1)
        probabilities = tuple(TOP_PROBABILITY if i == cls else rest for i in range(n))
        confidence = TOP_PROBABILITY * self.scope_probability
        decision = policy.decide(cls, confidence, text)
        in_scope = self.scope_probability >= 0.5
        return ClassificationResult(
            class_index=cls,
            category=config.categories[cls].name,
            confidence=confidence,
            model=decision.model,
            use_reasoning=decision.use_reasoning,
            probabilities=probabilities,
            entropy=-sum(p * math.log(p) for p in probabilities),
            in_scope=in_scope,
            labels=(config.categories[cls].name,) if in_scope else (),
            margin=TOP_PROBABILITY - rest,
            revision=Revision("fake-model", config.category_set_version, config.policy_version),
            language="en",
            # multi_label files: the main category near the scope probability, the others well under it
            label_scores=tuple(self.scope_probability * (0.9 if i == cls else 0.1) for i in range(n)) if config.multi_label else (),
        )
