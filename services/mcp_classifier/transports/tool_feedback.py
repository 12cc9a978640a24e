"""POST /v1/tools/feedback: the tools a model called for a request, so the filter ranks them higher for requests like it.

The door adds the HTTP to ToolFilter.record_feedback: the body limit, 400 for bad input from the same pydantic
model /openapi.json documents, 404 while feedback is off, backend failures from the one error table, and a count of
every outcome (mcp_classifier_tool_feedback_total). The edge guard in front of every route applies: keys, Host and
Origin checks, the rate limit.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response

from ..protocol import correlation
from ..protocol.dispatcher import method_failure
from ..protocol.jsonrpc import INVALID_PARAMS, JsonRpcError
from ..protocol.tools import ToolError
from ..telemetry import GatewayMetrics
from ..toolfilter.tool_filter import FeedbackOff, ToolFilter
from . import openapi
from .bodies import json_response, read_json, refusal, rest_error
from .correlated import TOOL_FEEDBACK_PATH

METHOD = "tools/feedback"  # the access log's method, and the error log's
FEEDBACK_OFF = "tool_feedback_off"  # the refusal's kind while tool_feedback is off
NOT_KEPT = "the feedback store (Redis) is unavailable: nothing was kept"


def add_tool_feedback_route(app: FastAPI, tool_filter: ToolFilter, max_body_bytes: int, metrics: GatewayMetrics) -> None:
    """POST /v1/tools/feedback: ``{"query" or "messages", "called": [tools]}`` -> ``{"stored", "tools"}``."""

    @app.post(TOOL_FEEDBACK_PATH, openapi_extra=openapi.TOOL_FEEDBACK)
    async def tool_feedback(request: Request) -> Response:
        return await metrics.observed(TOOL_FEEDBACK_PATH, _answer(request))

    async def _answer(request: Request) -> Response:
        correlation.note(era="rest", method=METHOD)
        try:
            body = await read_json(request, max_body_bytes)
            try:
                stored, tools = await tool_filter.record_feedback(body)
            except ToolError as exc:
                raise JsonRpcError(INVALID_PARAMS, str(exc)) from None
        except FeedbackOff as exc:
            metrics.tool_feedback.labels("off").inc()
            return refusal(404, FEEDBACK_OFF, str(exc))
        except JsonRpcError as exc:
            metrics.tool_feedback.labels("invalid").inc()
            return rest_error(exc, METHOD, metrics)
        except Exception as exc:  # noqa: BLE001 - method_failure logs every failure it does not expect
            metrics.tool_feedback.labels("failed").inc()
            return rest_error(method_failure(exc, METHOD), METHOD, metrics)
        metrics.tool_feedback.labels("stored" if stored else "unavailable").inc()
        return json_response({"stored": True, "tools": tools} if stored else {"stored": False, "tools": tools, "reason": NOT_KEPT})
