"""Domain objects <-> the gRPC messages in protos/ (used by the replica and the gateway's client)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from ..classify.categories import CategoryConfig
from ..classify.results import ClassificationResult, ClassifierInfo, Revision
from ..classify.scope_stats import ScopeStats
from .v1 import classifier_pb2 as pb


def results_to_proto(results: Sequence[ClassificationResult], with_probabilities: bool) -> list[pb.Classification]:
    return [
        pb.Classification(
            class_index=r.class_index,
            category=r.category,
            confidence=r.confidence,
            model=r.model,
            use_reasoning=r.use_reasoning,
            probabilities=list(r.probabilities) if with_probabilities else [],
            entropy=r.entropy,
            out_of_scope=not r.in_scope,
            labels=list(r.labels),
            margin=r.margin,
            model_id=r.revision.model_id,
            category_set_version=r.revision.category_set_version,
            policy_version=r.revision.policy_version,
            language=r.language,
            language_unserved=not r.language_served,
            label_scores=list(r.label_scores),
        )
        for r in results
    ]


def results_from_proto(messages: Sequence[pb.Classification]) -> list[ClassificationResult]:
    return [
        ClassificationResult(
            class_index=m.class_index,
            category=m.category,
            confidence=m.confidence,
            model=m.model,
            use_reasoning=m.use_reasoning,
            probabilities=tuple(m.probabilities),
            entropy=m.entropy,
            in_scope=not m.out_of_scope,
            labels=tuple(m.labels),
            margin=m.margin,
            revision=Revision(m.model_id, m.category_set_version, m.policy_version),
            language=m.language,
            language_served=not m.language_unserved,
            label_scores=tuple(m.label_scores),
        )
        for m in messages
    ]


def info_to_proto(info: ClassifierInfo, stats: pb.BatchStats | None = None) -> pb.InfoResponse:
    config = info.categories
    return pb.InfoResponse(
        model_id=info.model_id,
        category_set_version=info.category_set_version,
        policy_version=info.policy_version,
        index_size=info.index_size,
        temperature=info.temperature,
        leave_one_out_accuracy=info.loo_accuracy,
        device=info.device,
        dtype=info.dtype,
        pooling=info.pooling,
        categories=[pb.Category(name=c.name, description=c.description, system_prompt=c.system_prompt) for c in config.categories],
        config_json=config.model_dump_json(),
        batch_stats=stats,
        reload_error=info.reload_error or "",
        scoring=info.scoring,
        scope_json=json.dumps(info.scope.to_dict()) if info.scope else "",
        served_languages=list(info.served_languages),
        language_min_confidence=info.language_min_confidence,
    )


def info_from_proto(message: pb.InfoResponse) -> ClassifierInfo:
    config = CategoryConfig.model_validate_json(message.config_json)
    return ClassifierInfo(
        model_id=message.model_id,
        device=message.device,
        dtype=message.dtype,
        pooling=message.pooling,
        categories=config,
        category_set_version=message.category_set_version,
        policy_version=message.policy_version,
        index_size=message.index_size,
        temperature=message.temperature,
        loo_accuracy=message.leave_one_out_accuracy,
        reload_error=message.reload_error or None,
        scoring=message.scoring,
        scope=ScopeStats.from_dict(json.loads(message.scope_json)) if message.scope_json else None,
        served_languages=tuple(message.served_languages),
        language_min_confidence=message.language_min_confidence or 1.0,
    )


def vectors_to_bytes(vectors: np.ndarray) -> bytes:
    """Row-major little-endian float32, as EmbedResponse.vectors carries them."""
    return np.ascontiguousarray(vectors, dtype="<f4").tobytes()


def vectors_from_bytes(data: bytes, rows: int, dimensions: int) -> np.ndarray:
    vectors = np.frombuffer(data, dtype="<f4")
    if vectors.size != rows * dimensions:
        raise ValueError(f"embedder sent {vectors.size} values for {rows} texts of {dimensions} dimensions")
    return vectors.reshape(rows, dimensions).astype(np.float32)
