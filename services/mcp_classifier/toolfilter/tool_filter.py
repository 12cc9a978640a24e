"""The semantic tool filter: rank a caller's MCP or OpenAI tools against a query, keep the top ones.

A tool's name and description are embedded as a document, the query as a query (with the model's
instruction); the order is the cosine order, or by default the hybrid one that also weighs BM25
over the full text with the parameters (tool_ranking.py says why), and ranks the parts of a request
that asks for several things beside it (query_clauses.py). A tool's past requests (feedback from use, and
`examples` sent with it) lift its cosine towards theirs (past_queries.py). The threshold is on the cosine similarity,
the score every answer carries: a tool's best over the request and its parts. Whatever goes wrong (the backend is down, a timeout),
the filter fails open: every tool comes back, flagged `filtered: false` with the reason, so a
router never loses its tools.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..protocol.tools import Tool, ToolError, ToolRegistry
from .filter_models import DEFAULT_TOP_K, parse_feedback, parse_request
from .past_queries import PastQueries, PastQueryStore, lift, merged, of_examples
from .query_clauses import ask_count, request_clauses
from .query_identifiers import keyword_query
from .tool_confidence import tool_confidences
from .tool_ranking import LexicalIndexes, ToolRanking, embedding_ranking, hybrid_ranking, tool_examples, tool_fields, tool_texts

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.3  # LiteLLM's similarity_threshold, on the cosine scale of larger embedding models
# A model's cosines between a request and the tool it needs run on its own scale, so a threshold that
# suits one model cuts another's relevant tools. Measured with eval-tools on the project's tool sets
# (docs/decisions/0031-tool-threshold-default.md): MiniLM gives 29-33% of the needed tools a cosine under 0.3, so at 0.3 a caller
# with the defaults got recall 0.68-0.72 and no tool at all for 17% of requests. 0.1 is the 5th
# percentile of those cosines on the first set; it leaves recall within 0.01 of no threshold.
MEASURED_DEFAULT_THRESHOLDS = {"builtin:minilm": 0.1}


def default_threshold_for(model: str) -> float:
    """The threshold a caller gets when they give none: measured for the model where we could, else LiteLLM's."""
    return MEASURED_DEFAULT_THRESHOLDS.get(model, DEFAULT_THRESHOLD)


class Embeddings(Protocol):
    """Cached tool vectors and fresh query vectors (cache.embeddings.ToolEmbeddings in the service)."""

    async def documents(self, texts: Sequence[str]) -> np.ndarray: ...
    async def examples(self, texts: Sequence[str]) -> np.ndarray: ...
    async def queries(self, texts: Sequence[str]) -> np.ndarray: ...
    async def tool_ids(self, texts: Sequence[str]) -> list[str]: ...


DEFAULT_FEEDBACK_WEIGHT = 0.35  # settings.ToolFilterSettings.tool_feedback_weight's default, for filters built without settings


@dataclass(frozen=True)
class PastQueryOptions:
    """Feedback from use and examples: where past requests are kept (None: feedback off; examples still count), and
    how far a tool's cosine moves towards its best past request's."""

    store: PastQueryStore | None = None
    weight: float = DEFAULT_FEEDBACK_WEIGHT


class FeedbackOff(RuntimeError):
    """Feedback from use is off on this service (tool_feedback)."""


@dataclass(frozen=True)
class Selection:
    indices: list[int]  # into the caller's tool list, best first
    scores: list[float]  # cosine similarity of each selected tool
    total: int
    filtered: bool
    reason: str | None = None
    confidences: list[float] = field(default_factory=list)  # of each selected tool: the probability it is needed (tool_confidence)
    needs: int = 1  # the separate asks found in the request (query_clauses), each ranked for


def tool_name(tool: dict[str, Any]) -> str:
    return str(tool_fields(tool).get("name") or "")


@dataclass(frozen=True)
class FilterArguments:
    query: str
    tools: list[dict[str, Any]]
    top_k: int
    threshold: float


def filter_arguments(arguments: Any, default_threshold: float = DEFAULT_THRESHOLD) -> FilterArguments:
    """The query, tools, top_k and threshold of select_tools and of POST /v1/tools/filter, checked alike at both doors.

    The check is ToolFilterRequest's, the model /openapi.json documents the filter's body from. ToolError names the problem.
    """
    asked = parse_request(arguments)
    threshold = default_threshold if asked.threshold is None else asked.threshold
    return FilterArguments(query_from(asked.query, asked.messages), asked.tools, asked.top_k, float(threshold))


def query_from(query: str | None, messages: list[Any] | None) -> str:
    """`query`, else the last user message of `messages` (OpenAI or MCP shapes, text parts joined)."""
    if query and query.strip():
        return query
    if messages:
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                text = _content_text(message.get("content"))
                if text.strip():
                    return text
    raise ToolError("give a non-empty `query`, or `messages` with a user message that has text")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):  # MCP: {"type": "text", "text": ...}
        content = [content]
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
    return ""


class ToolFilter:
    def __init__(
        self,
        embeddings: Embeddings,
        *,
        max_text_length: int,
        max_tools: int,
        ranking: ToolRanking = "hybrid",
        lexical_weight: float = 0.3,
        lexical_indexes: int = 64,
        default_threshold: float = DEFAULT_THRESHOLD,
        query_clauses: bool = True,
        past_queries: PastQueryOptions = PastQueryOptions(),
    ) -> None:
        self.embeddings = embeddings
        self.past_queries = past_queries
        self.max_text_length = max_text_length
        self.max_tools = max_tools
        self.ranking = ranking
        self.lexical_weight = lexical_weight
        self.lexical = LexicalIndexes(lexical_indexes)
        self.default_threshold = default_threshold
        self.query_clauses = query_clauses

    async def select(self, query: str, tools: Sequence[dict[str, Any]], top_k: int, threshold: float) -> Selection:
        """Raises ToolError for bad input; fails open (all tools, filtered False) on anything else."""
        if len(tools) > self.max_tools:
            raise ToolError(f"{len(tools)} tools: at most {self.max_tools} per call")
        texts = [tool_texts(tool, self.max_text_length) for tool in tools]  # ToolError on a malformed tool
        examples = [tool_examples(tool, self.max_text_length) for tool in tools]
        if not tools:
            return Selection([], [], 0, True)
        hybrid = self.ranking == "hybrid"
        request = query[: self.max_text_length]
        parts = [request, *request_clauses(request)] if hybrid and self.query_clauses else [request]
        summaries = [summary for summary, _ in texts]
        try:
            documents = await self.embeddings.documents(summaries)
            query_vectors = await self.embeddings.queries(parts)
            past = merged(await self._kept_feedback(summaries), await self._examples(examples))
        except Exception as exc:  # noqa: BLE001 - fail open on any failure: the router keeps every tool
            log.warning("tool filter failed open for %d tools: %s", len(tools), exc)
            return Selection(list(range(len(tools))), [], len(tools), False, f"{type(exc).__name__}: {exc}")
        cosines = query_vectors @ documents.T  # rows: the request, then its parts
        lifted = lift(cosines, query_vectors, past, self.past_queries.weight) if past is not None else None
        served = cosines if lifted is None else lifted  # the scores and the threshold: as past requests lifted them
        if hybrid:
            lexical = np.vstack([self.lexical.scores([full for _, full in texts], keyword_query(part)) for part in parts])
            ranked = hybrid_ranking(cosines, lexical, self.lexical_weight, lifted)
        else:
            ranked = embedding_ranking(cosines, lifted)
        scores = served.max(axis=0)  # a tool's cosine to the request, or to the part of it that it serves
        kept = [i for i in ranked.order if scores[i] >= threshold][:top_k]
        asks = ask_count(parts[1:])
        confidences = tool_confidences(ranked, asks, self.ranking)
        return Selection(
            kept, [float(scores[i]) for i in kept], len(tools), True, confidences=[float(confidences[i]) for i in kept], needs=asks
        )

    async def _kept_feedback(self, summaries: Sequence[str]) -> PastQueries | None:
        """The past requests kept for these tools; None with feedback off, and when the store fails (ranked as without)."""
        store = self.past_queries.store
        if store is None:
            return None
        try:
            found = await store.past(await self.embeddings.tool_ids(summaries))
        except Exception as exc:  # noqa: BLE001 - history is a bonus: without it the filter still ranks
            log.warning("tool feedback unreadable, ranking without it: %s", exc)
            return None
        return PastQueries(*found) if found is not None else None

    async def _examples(self, examples: Sequence[Sequence[str]]) -> PastQueries | None:
        """The examples sent with the tools, as past requests (embedded as queries, cached like tool texts)."""
        flat = [text for texts in examples for text in texts]
        return of_examples(examples, await self.embeddings.examples(flat)) if flat else None

    async def record_feedback(self, arguments: Any) -> tuple[bool, int]:
        """POST /v1/tools/feedback: keep the request's vector (the one select ranks with) for each tool called.

        (kept, distinct tools named). ToolError for bad input, FeedbackOff when feedback is off; a backend failure
        to embed the request raises as the backend raised it.
        """
        store = self.past_queries.store
        if store is None:
            raise FeedbackOff("feedback from use is off on this service (tool_feedback)")
        asked = parse_feedback(arguments)
        request = query_from(asked.query, asked.messages)[: self.max_text_length]  # as select truncates it
        tool_ids = list(dict.fromkeys(await self.embeddings.tool_ids([tool_texts(t, self.max_text_length)[0] for t in asked.called])))
        (vector,) = await self.embeddings.queries([request])
        return await store.record(tool_ids, vector), len(tool_ids)


def select_tools_schema(max_tools: int, default_threshold: float = DEFAULT_THRESHOLD) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "The user's request."},
            "messages": {"type": "array", "description": "A chat (OpenAI or MCP messages); the last user message is the query."},
            "tools": {
                "type": "array",
                "maxItems": max_tools,
                "description": "MCP tools ({name, description, inputSchema}) or OpenAI tools ({type: function, function: {...}}); "
                "each may carry `examples`, example user requests ranked as its past requests are.",
            },
            "top_k": {"type": "integer", "minimum": 1, "default": DEFAULT_TOP_K},
            "threshold": {"type": "number", "minimum": -1, "maximum": 1, "default": default_threshold},
        },
        "required": ["tools"],
        "additionalProperties": False,
    }


def register_tool_filter(registry: ToolRegistry, tool_filter: ToolFilter) -> None:
    async def select_tools(arguments: dict[str, Any]) -> dict[str, Any]:
        asked = filter_arguments(arguments, tool_filter.default_threshold)
        tools = asked.tools
        selection = await tool_filter.select(asked.query, tools, asked.top_k, asked.threshold)
        out: dict[str, Any] = {
            "tools": [
                {"name": tool_name(tools[i]), "score": s, "confidence": c}
                for i, s, c in zip(selection.indices, selection.scores, selection.confidences)
            ]
            if selection.filtered
            else [{"name": tool_name(t)} for t in tools],
            "filtered": selection.filtered,
            "total": selection.total,
            "kept": len(selection.indices),
        }
        if selection.filtered:
            out["needs"] = selection.needs
        if selection.reason:
            out["reason"] = selection.reason
        return out

    registry.register(
        Tool(
            name="select_tools",
            title="Select relevant tools",
            description="Rank a tool list (MCP or OpenAI tools) against a query, or the last user message of `messages`, "
            "and return the names of the top_k tools whose cosine similarity is at least threshold, best first, with "
            "their scores, the probability that the request needs each (confidence), and how many separate asks it "
            "found (needs). If the embedding backend fails, every tool is returned with filtered=false and the reason.",
            input_schema=select_tools_schema(tool_filter.max_tools, tool_filter.default_threshold),
            output_schema={
                "type": "object",
                "properties": {
                    "tools": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "score": {"type": "number", "description": "cosine similarity: what the threshold cuts"},
                                "confidence": {
                                    "type": "number",
                                    "minimum": 0,
                                    "maximum": 1,
                                    "description": "the probability that the request needs this tool",
                                },
                            },
                        },
                    },
                    "needs": {"type": "integer", "minimum": 1, "description": "separate asks found in the request, each ranked for"},
                    "filtered": {"type": "boolean"},
                    "total": {"type": "integer"},
                    "kept": {"type": "integer"},
                    "reason": {"type": "string"},
                },
                "required": ["tools", "filtered", "total", "kept"],
            },
            handler=select_tools,
            annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
        )
    )
