"""POST /classify: the vLLM Semantic Router's remote classifier (``label_distribution.v1``) over the default classifier,
and POST /classifiers/NAME/classify, the same contract over a named one.

The router's ``HTTPClassifierInference`` sends ``{"inputs": ...}`` and reads one label distribution per text
(protocol/label_distribution.py shapes them). The door adds the HTTP: body limit, errors from the one table in
the REST error shape, and the revision that decided in headers, as ``_meta`` names it elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import Response

from ..backend.base import BackendUnavailable, ClassificationBackend
from ..classify.registry import DEFAULT, UnknownClassifier
from ..classify.results import ClassificationResult, ClassifierInfo
from ..protocol import correlation
from ..protocol.dispatcher import method_failure
from ..protocol.label_distribution import LabelSet, label_distributions, read_router_request
from ..telemetry import GatewayMetrics
from . import openapi
from .bodies import json_response, read_json, refusal, rest_error

ROUTER_CLASSIFY_PATH = "/classify"
NAMED_CLASSIFY_ROUTE = "/classifiers/{name}/classify"  # the same contract, for the classifier of that name; its metrics label
UNKNOWN_CLASSIFIER = "unknown_classifier"  # the refusal's kind: 404, the names served in the message
METHOD = "classify"  # the access log's method, and the error log's
# The revision that decided, as _meta's model_id, category_set_version and policy_version.
MODEL_HEADER = "X-Model"
CATEGORY_SET_HEADER = "X-Category-Set-Version"
POLICY_HEADER = "X-Policy-Version"
INFO_TRIES = 2  # a reload between the answer and the label names: the second read sees the new categories


@dataclass(frozen=True)
class RouterClassifyLimits:
    """The limits classify_text and classify_batch apply, applied here too."""

    max_body_bytes: int
    max_text_length: int
    max_batch_texts: int


def add_router_classify_route(app: FastAPI, backend: ClassificationBackend, metrics: GatewayMetrics, limits: RouterClassifyLimits) -> None:
    """POST /classify: ``{"inputs": "<text>"}`` -> ``[{"label", "score"}, ...]``; a list of inputs -> a list of those.
    POST /classifiers/NAME/classify: the same for the classifier NAME; an unknown name is a 404 listing the names served."""

    @app.post(ROUTER_CLASSIFY_PATH, openapi_extra=openapi.ROUTER_CLASSIFY)
    async def router_classify(request: Request) -> Response:
        return await metrics.observed(ROUTER_CLASSIFY_PATH, _answer(request, DEFAULT))

    @app.post(NAMED_CLASSIFY_ROUTE, openapi_extra=openapi.NAMED_CLASSIFY)
    async def named_classify(name: str, request: Request) -> Response:
        return await metrics.observed(NAMED_CLASSIFY_ROUTE, _answer(request, name))

    async def _answer(request: Request, classifier: str) -> Response:
        correlation.note(era="rest", method=METHOD)
        try:
            asked = read_router_request(await read_json(request, limits.max_body_bytes), limits.max_text_length, limits.max_batch_texts)
            results = await backend.predict(asked.texts, classifier)  # one backend call for every text, as classify_batch
            info = await _info_for(backend, results[0], classifier)
            distributions = label_distributions(results, LabelSet.of(info.categories))
        except UnknownClassifier as exc:
            return refusal(404, UNKNOWN_CLASSIFIER, str(exc))
        except Exception as exc:  # noqa: BLE001 - method_failure logs every failure it does not expect
            return rest_error(method_failure(exc, METHOD), METHOD, metrics)
        return json_response(distributions if asked.batched else distributions[0], headers=_revision_headers(results[0], info))


async def _info_for(backend: ClassificationBackend, answer: ClassificationResult, classifier: str) -> ClassifierInfo:
    """The categories ``answer`` was computed over: the label names must be the ones its probabilities are for."""
    wanted = answer.revision.category_set_version
    for _ in range(INFO_TRIES):
        info = (await backend.health(need_info=True)).require_info(classifier)
        if not wanted or info.category_set_version == wanted:
            return info
    raise BackendUnavailable("the categories changed while answering; retry")


def _revision_headers(answer: ClassificationResult, info: ClassifierInfo) -> dict[str, str]:
    revision = answer.revision
    return {
        MODEL_HEADER: revision.model_id or info.model_id,
        CATEGORY_SET_HEADER: revision.category_set_version or info.category_set_version,
        POLICY_HEADER: revision.policy_version or info.policy_version,
    }
