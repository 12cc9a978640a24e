"""How tools are ranked against a query: what is embedded, what is matched by words, and how the two meet.

Measured on two tool-retrieval sets written for this project (docs/decisions/0027-tool-hybrid-ranking.md), a small sentence
encoder ranks better when it sees a tool's name and description alone: parameter lists dilute a
mean-pooled vector. The parameters still count, through BM25 over the full text, which also catches
the exact words (product names, ids, verbs) an encoder blurs, and the everyday verbs for the actions
the tool's name says (tool_actions: "file a bug" finds create_issue). `hybrid` adds the two rankings as
per-query z-scores; `embedding` is the pure cosine order.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
from rank_bm25 import BM25Okapi

from ..classify.lexical import bm25_index, words, zscores, zscores_like
from ..protocol.tools import ToolError
from .tool_actions import action_words

ToolRanking = Literal["hybrid", "embedding"]
PARAMETERS_LISTED = 20  # parameter names and descriptions kept per tool: enough to say what it does


def tool_fields(tool: Any) -> dict[str, Any]:
    """The tool's own fields: OpenAI function tools wrap them in "function"; MCP tools do not."""
    if not isinstance(tool, dict):
        raise ToolError(f"a tool must be an object, got {type(tool).__name__}")
    inner = tool.get("function") if tool.get("type") == "function" else None
    fields = inner if isinstance(inner, dict) else tool
    if not isinstance(fields.get("name"), str) or not fields["name"]:
        raise ToolError("every tool needs a name")
    return fields


def _name_heading(name: str) -> str:
    words = name.replace("__", " ").replace("_", " ").replace("-", " ").replace(".", " ")
    return f"{words} ({name})" if words != name else name


def _description(fields: dict[str, Any]) -> str | None:
    description = fields.get("description")
    return description.strip() if isinstance(description, str) and description.strip() else None


def tool_texts(tool: dict[str, Any], max_chars: int, with_action_words: bool = True) -> tuple[str, str]:
    """(summary, full text) from one read of the tool's fields.

    The summary is what the encoder embeds: the name (also spelled as words) and the description.
    The full text is what BM25 matches: the summary, the everyday words for the actions in the
    tool's name (tool_actions), then each parameter's name and description.
    """
    fields = tool_fields(tool)
    summary = ". ".join(p for p in (_name_heading(fields["name"]), _description(fields)) if p)
    actions = action_words(fields["name"]) if with_action_words else ""
    keyword_text = f"{summary}. Asked as: {actions}" if actions else summary
    schema = fields.get("inputSchema") or fields.get("input_schema") or fields.get("parameters") or {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return summary[:max_chars], keyword_text[:max_chars]
    described = []
    for param, spec in list(properties.items())[:PARAMETERS_LISTED]:
        description = spec.get("description") if isinstance(spec, dict) else None
        described.append(f"{param}: {description}" if isinstance(description, str) and description else str(param))
    return summary[:max_chars], f"{keyword_text}. Parameters: {'; '.join(described)}"[:max_chars]


MAX_EXAMPLES = 32  # example requests one tool may carry: enough to cover its uses, bounded per request


def tool_examples(tool: dict[str, Any], max_chars: int) -> list[str]:
    """The example requests a tool carries (`examples`, beside its description), blank ones left out; ToolError if malformed.

    They stand for past requests of a tool with no history yet (past_queries): embedded as queries, never as
    its description, and never matched by BM25.
    """
    examples = tool_fields(tool).get("examples")
    if examples is None:
        return []
    if not isinstance(examples, list) or len(examples) > MAX_EXAMPLES or not all(isinstance(e, str) for e in examples):
        raise ToolError(f"a tool's `examples` must be a list of at most {MAX_EXAMPLES} strings")
    return [example[:max_chars] for example in examples if example.strip()]


def tool_summary(tool: dict[str, Any], max_chars: int) -> str:
    return tool_texts(tool, max_chars)[0]


def tool_text(tool: dict[str, Any], max_chars: int) -> str:
    return tool_texts(tool, max_chars)[1]


def fuse(cosines: np.ndarray, lexical: np.ndarray, lexical_weight: float, lifted: np.ndarray | None = None) -> np.ndarray:
    """The hybrid order's key: (1 - w)·z(cosine) + w·z(BM25), row by row.

    ``lifted``: the cosines as the tools' past requests lifted them (past_queries), put in the plain cosines' z units,
    so a tool without history keeps exactly its key and only the lifted tools move.
    """
    semantic = zscores(cosines) if lifted is None else zscores_like(lifted, cosines)
    return (1.0 - lexical_weight) * semantic + lexical_weight * zscores(lexical)


WHOLE_REQUEST_LEAD = 2  # the whole request's first choices that no part's ranking may push down


def interleave(orders: Sequence[Sequence[int]], lead: int = WHOLE_REQUEST_LEAD) -> list[int]:
    """The first ranking's top `lead`, then round-robin over the others and the rest of the first, each item at
    its first appearance.

    The whole request's ranking goes first, so the top five hold the best tool of every part of a
    multi-part request without pushing down what the whole request ranks first and second. Measured on
    four tool sets (docs/decisions/0028-tool-query-clauses.md): letting the parts in after the whole's first choice only
    pushed the needed tool out when the whole request had it second or third, and the split rule also
    fires on one-ask requests ("who owns it and how much is it worth?").
    """
    if not orders:
        return []
    whole, parts = orders[0], orders[1:]
    merged: dict[int, None] = dict.fromkeys(int(item) for item in whole[:lead])
    rest = [*parts, whole[lead:]]
    for rank in range(max((len(order) for order in rest), default=0)):
        for order in rest:
            if rank < len(order):
                merged.setdefault(int(order[rank]), None)
    return list(merged)


class Ranked(NamedTuple):
    """A tool list in order, and each tool's key: its best hybrid key over the request and its parts (z units)."""

    order: list[int]
    keys: np.ndarray


def hybrid_ranking(cosines: np.ndarray, lexical: np.ndarray, lexical_weight: float, lifted: np.ndarray | None = None) -> Ranked:
    """Tool indices best first, with their keys. Rows: the whole request, then its parts (query_clauses); one column
    per tool. ``lifted``: the cosines with the past requests' lift (fuse)."""
    fused = fuse(cosines, lexical, lexical_weight, lifted)
    return Ranked(interleave([np.argsort(-row, kind="stable").tolist() for row in fused]), fused.max(axis=0))


def hybrid_order(cosines: np.ndarray, lexical: np.ndarray, lexical_weight: float, lifted: np.ndarray | None = None) -> list[int]:
    """hybrid_ranking's order alone."""
    return hybrid_ranking(cosines, lexical, lexical_weight, lifted).order


def embedding_ranking(cosines: np.ndarray, lifted: np.ndarray | None = None) -> Ranked:
    """The pure cosine order of the whole request (row 0; as past requests lifted it), stable on ties; keys are those
    cosines in the plain cosines' z units (fuse says why)."""
    served = cosines if lifted is None else lifted
    order = sorted(range(cosines.shape[1]), key=lambda i: (-float(served[0, i]), i))
    return Ranked(order, zscores_like(served[:1], cosines[:1])[0])


class LexicalIndexes:
    """BM25 indexes of tool lists, kept by content: a router sends the same list with every request.

    Building an index of 1,000 tools costs tens of milliseconds of Python; scoring a query against
    it costs about one. So a list seen before pays only the scoring, like its vectors.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # Keyed by the texts themselves: a dict compares them on a hit, which costs what hashing them would.
        self._indexes: OrderedDict[tuple[str, ...], BM25Okapi] = OrderedDict()

    def scores(self, texts: Sequence[str], query: str) -> np.ndarray:
        key = tuple(texts)
        index = self._indexes.get(key)
        if index is None:
            index = bm25_index([words(text) for text in texts])
            if self.capacity:
                self._indexes[key] = index
                while len(self._indexes) > self.capacity:
                    self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(key)
        return np.asarray(index.get_scores(words(query)), dtype=np.float64)
