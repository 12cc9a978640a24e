"""Texts -> full classification results: encoder + category index + routing policy."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..engine.encoder import TextEncoder
from .categories import CategoryConfig
from .fusion import LexicalMode, TokenMatching
from .index import CategoryIndex
from .language import LanguageGate, LanguageVerdict
from .part_labels import part_label_mask
from .query_parts import topic_parts
from .results import ClassificationResult, ClassifierInfo, Revision
from .routing import RoutingPolicy
from .scope import IN_SCOPE_PROBABILITY
from .scorers import ScoringMethod
from .scoring import entropy_nats
from .start_cache import StartCache

log = logging.getLogger(__name__)
_State = tuple[CategoryConfig, CategoryIndex, RoutingPolicy, Revision]
# Where out-of-scope detection is off, a second category joins labels when it holds this much of the probability.
LABEL_PROBABILITY = 0.25
SecondLabels = Literal["parts", "off"]


class Classifier:
    """Synchronous and CPU/GPU-bound: callers run it off the event loop (worker thread or replica)."""

    def __init__(
        self,
        encoder: TextEncoder,
        config: CategoryConfig,
        scoring_method: ScoringMethod = "auto",
        lexical: LexicalMode = "auto",
        token_matching: TokenMatching = "off",
        cache: StartCache | None = None,
        scope_background: bool = True,
        *,
        second_labels: SecondLabels = "parts",
        language_gate: LanguageGate | None = None,
    ) -> None:
        self.encoder = encoder
        self._cache = cache  # what a start computed from the categories file, kept on disk (classify/start_cache.py)
        self.scoring_method: ScoringMethod = scoring_method
        self.lexical: LexicalMode = lexical
        self.token_matching: TokenMatching = token_matching
        self.scope_background = scope_background
        self.second_labels: SecondLabels = second_labels
        self.language_gate = language_gate  # None: languages are neither detected nor checked
        self.reload_error: str | None = None  # why the last reload was refused (set by the registry); None once one goes live
        self._install(config)

    def _install(self, config: CategoryConfig) -> None:
        index = CategoryIndex.build(
            config,
            encoder=self.encoder,
            method=self.scoring_method,
            lexical=self.lexical,
            token_matching=self.token_matching,
            cache=self._cache,
            background=self.scope_background,
        )
        # The versions hash the whole file: worked out once here, not on every info read (each Classify RPC) or answer.
        revision = Revision(self.encoder.info.model_id, config.category_set_version, config.policy_version)
        # One assignment swaps everything together, so a concurrent batch sees old or new, never a mix.
        self._state: _State = (config, index, RoutingPolicy(config), revision)
        log.info(
            "category index built: %d categories, %d vectors, scoring %s (asked: %s), temperature %.4f, held-out accuracy %.3f",
            len(config.categories),
            index.size,
            index.scorer.method,
            self.scoring_method,
            index.calibration.temperature,
            index.calibration.loo_accuracy,
        )

    def apply(self, config: CategoryConfig) -> bool:
        """Put ``config`` live when it differs from the live categories; True when it did.

        The registry (classify.registry) reads and validates the file and keeps ``reload_error``; whoever asked
        for the reload says how it went (classify.reload_report), once.
        """
        if (config.category_set_version, config.policy_version) == self.versions:
            return False
        self._install(config)
        return True

    @property
    def config(self) -> CategoryConfig:
        """The live categories file."""
        return self._state[0]

    @property
    def versions(self) -> tuple[str, str]:
        """(category_set_version, policy_version) of the live categories."""
        revision = self._state[3]
        return revision.category_set_version, revision.policy_version

    @property
    def info(self) -> ClassifierInfo:
        config, index, _, revision = self._state
        enc = self.encoder.info
        return ClassifierInfo(
            model_id=enc.model_id,
            device=enc.device,
            dtype=enc.dtype,
            pooling=enc.pooling,
            categories=config,
            category_set_version=revision.category_set_version,
            policy_version=revision.policy_version,
            index_size=index.size,
            temperature=index.calibration.temperature,
            loo_accuracy=index.calibration.loo_accuracy,
            reload_error=self.reload_error,
            scoring=index.scorer.method,
            scope=index.scope.stats if index.scope is not None else None,
            served_languages=tuple(sorted(self.language_gate.served)) if self.language_gate else (),
            language_min_confidence=self.language_gate.min_confidence if self.language_gate else 1.0,
        )

    def embed(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """Unit vectors for the tool filter: queries with the instruction, documents without."""
        if not texts:
            return np.zeros((0, self.encoder.dimensions), dtype=np.float32)
        features = self.encoder.encode_queries(texts) if kind == "query" else self.encoder.encode_documents(texts)
        return np.asarray(self.encoder.embedding_part(features), dtype=np.float32)

    def classify(self, texts: Sequence[str]) -> list[ClassificationResult]:
        """By classify_together's road: the queries and their parts (second labels) in one embedding call."""
        return classify_together([(self, text) for text in texts])

    @property
    def state(self) -> _State:
        """The live categories, index, policy and revision, read together (classify_together holds one per batch)."""
        return self._state

    def reads_parts(self, state: _State) -> bool:
        """Whether answers under ``state`` embed the queries' parts (topic_parts) for their second labels."""
        return self.second_labels == "parts" and state[1].scope is not None

    def decide(
        self, state: _State, texts: Sequence[str], vectors: np.ndarray, tokens: list[Any] | None, parts: BatchParts
    ) -> list[ClassificationResult]:
        """The answers for ``texts`` from their query features (and token vectors where the index scores them), and
        their parts' (second labels), all from the batch's one embedding call (classify_together)."""
        config, index, policy, revision = state
        if tokens is not None and index.uses_tokens:
            probs = index.probabilities(vectors, list(texts), tokens)
        else:
            probs = index.probabilities(vectors, list(texts))
        label_scores = np.zeros((len(texts), 0))  # per-category independent scores: multi_label files only
        if index.scope is not None:
            in_scope_p, similarities = index.scope.in_scope_probability(np.asarray(vectors))
            joins = self._second_labels(index, texts, probs, parts) if self.reads_parts(state) else np.zeros(probs.shape, dtype=bool)
            if config.multi_label:
                label_scores = index.scope.label_probabilities(np.asarray(vectors), similarities)
        else:  # the file turns detection off: every query is in scope, and a category with a good share joins labels
            in_scope_p, joins = np.ones(len(texts)), probs >= LABEL_PROBABILITY
        entropies = entropy_nats(probs)
        fallback = config.fallback_index
        verdicts = [self.language_gate.check(t) for t in texts] if self.language_gate else [LanguageVerdict("", True)] * len(texts)
        results = []
        for text, row, ent, p_in, joining, verdict, scores in zip(texts, probs, entropies, in_scope_p, joins, verdicts, label_scores):
            order = np.argsort(-row)
            cls = int(order[0])
            in_scope = bool(p_in >= IN_SCOPE_PROBABILITY) and verdict.served
            # The answer is right only if the model reads the query's language, the query is in scope and the
            # category is right: the probabilities multiply.
            confidence = float(row[cls] * p_in * (1.0 - verdict.unserved_probability))
            decision = policy.decide(cls if in_scope or fallback is None else fallback, confidence, text)
            labels = tuple(config.categories[c].name for c in order if c == cls or joining[c])
            results.append(
                ClassificationResult(
                    class_index=cls,
                    category=config.categories[cls].name,
                    confidence=confidence,
                    model=decision.model,
                    use_reasoning=decision.use_reasoning,
                    probabilities=tuple(float(p) for p in row),
                    entropy=float(ent),
                    in_scope=in_scope,
                    labels=labels if in_scope else (),
                    margin=float(row[cls] - row[order[1]]) if len(order) > 1 else 1.0,
                    revision=revision,
                    language=verdict.language,
                    language_served=verdict.served,
                    label_scores=tuple(float(s) * (1.0 - verdict.unserved_probability) for s in scores),
                )
            )
        return results

    def _second_labels(self, index: CategoryIndex, texts: Sequence[str], probs: np.ndarray, batch: BatchParts) -> np.ndarray:
        """(B, C) whether each category is a second label of its query, from the query's parts (classify/part_labels.py)."""
        assert index.scope is not None
        parts, flat, vectors, tokens = batch.of(texts)
        if not flat:
            return np.zeros(probs.shape, dtype=bool)
        part_probs = index.probabilities(vectors, flat, tokens) if tokens is not None else index.probabilities(vectors, flat)
        part_in_scope = index.scope.label_probabilities(vectors, index.scope.in_scope_probability(vectors)[1])
        ends = np.cumsum([len(query_parts) for query_parts in parts])
        rows = [np.arange(end - len(query_parts), end) for end, query_parts in zip(ends, parts)]
        return part_label_mask(probs, rows, part_probs, part_in_scope)


def query_features(encoder: TextEncoder, texts: Sequence[str], *, tokens: bool) -> tuple[np.ndarray, list[Any] | None]:
    """Queries' features, with each one's token vectors from the same forward where ``tokens`` (token matching)."""
    if tokens:
        return encoder.encode_with_tokens(texts, query=True)
    return encoder.encode_queries(texts), None


def classify_together(asked: Sequence[tuple[Classifier, str]]) -> list[ClassificationResult]:
    """(classifier, text) pairs on one model -> one result each, in order.

    The query vectors depend on the model, the prompt before the query and the text, not on the classifier: the
    classifiers that put the same prompt before queries (the same instruction, or a model that takes none) share
    one embedding call, and a text asked of several of them is embedded once.
    """
    states = {id(c): c.state for c, _ in asked}  # each classifier's live state, read once for the whole batch
    by_prompt: dict[str, tuple[TextEncoder, dict[str, int], list[bool]]] = {}
    parts_of: dict[str, list[str]] = {}  # the texts asked of a classifier that reads parts (second labels)
    for classifier, text in asked:
        encoder, rows, wants_tokens = by_prompt.setdefault(classifier.encoder.query_prefix, (classifier.encoder, {}, [False]))
        rows.setdefault(text, len(rows))
        if classifier.reads_parts(states[id(classifier)]):  # its parts join the same call
            if text not in parts_of:
                parts_of[text] = topic_parts(text)
            for part in parts_of[text]:
                rows.setdefault(part, len(rows))
        wants_tokens[0] = wants_tokens[0] or states[id(classifier)][1].uses_tokens
    features = {prompt: query_features(encoder, list(rows), tokens=wanted[0]) for prompt, (encoder, rows, wanted) in by_prompt.items()}
    positions: dict[int, list[int]] = {}
    for i, (classifier, _) in enumerate(asked):
        positions.setdefault(id(classifier), []).append(i)
    results: list[ClassificationResult | None] = [None] * len(asked)
    for at in positions.values():
        classifier = asked[at[0]][0]
        texts = [asked[i][1] for i in at]
        rows = by_prompt[classifier.encoder.query_prefix][1]
        vectors, tokens = features[classifier.encoder.query_prefix]
        picked = [rows[t] for t in texts]
        answers = classifier.decide(
            states[id(classifier)],
            texts,
            vectors[picked],
            [tokens[r] for r in picked] if tokens is not None else None,
            BatchParts(parts_of, vectors, tokens, rows),
        )
        for i, answer in zip(at, answers):
            results[i] = answer
    return results  # type: ignore[return-value]  # every slot is filled above


@dataclass(frozen=True)
class BatchParts:
    """A batch's parts: each text's (topic_parts, for the texts asked of a classifier that reads them), and the
    features of one prompt's embedding call, where they are rows beside the queries (classify_together)."""

    parts_of: dict[str, list[str]]
    vectors: np.ndarray
    tokens: list[Any] | None
    rows: dict[str, int]

    def of(self, texts: Sequence[str]) -> tuple[list[list[str]], list[str], np.ndarray, list[Any] | None]:
        """(each text's parts, all of them in order, their vectors, their token vectors or None)."""
        parts = [self.parts_of.get(text, []) for text in texts]
        flat = [part for text_parts in parts for part in text_parts]
        at = [self.rows[part] for part in flat]
        return parts, flat, np.asarray(self.vectors[at]), [self.tokens[r] for r in at] if self.tokens is not None else None
