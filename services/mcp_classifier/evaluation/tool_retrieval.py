"""`mcp-classifier eval-tools`: how well the semantic tool filter finds the tools a query needs.

Recall@k (the share of a query's relevant tools in the top k, averaged over queries) and MRR (the
reciprocal rank of the first relevant tool), for both rankings the service offers (hybrid and
embedding alone, with the texts and fusion the service uses) and, in the same run on the same tool
texts, a BM25 baseline (rank-bm25): the keyword ranking a proxy could do without a model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..protocol.tools import ToolError
from ..toolfilter.past_queries import PastQueries, lift
from ..toolfilter.query_clauses import ask_count, request_clauses
from ..toolfilter.query_identifiers import identifier_words, keyword_query
from ..toolfilter.tool_confidence import tool_confidences
from ..toolfilter.tool_ranking import (
    LexicalIndexes,
    ToolRanking,
    embedding_ranking,
    fuse,
    hybrid_order,
    hybrid_ranking,
    tool_fields,
    tool_texts,
)
from .dataset import DatasetError
from .metrics import auroc, expected_calibration_error

CUTOFFS = (1, 5, 10)


@dataclass(frozen=True)
class RetrievalQuery:
    query: str
    relevant: tuple[str, ...]


@dataclass
class RetrievalScore:
    system: str
    queries: int
    recall: dict[int, float]
    mrr: float
    complete: float = 0.0  # share of requests with every tool they need in the top 5 (MetaTool's two-tool recall@5)


def _tool_list(tools_path: Path) -> list[dict[str, Any]]:
    """The tools as the service takes them: a JSON array of MCP or OpenAI function tools, or a
    tools/list result ({"tools": [...]}) saved as it came."""
    try:
        loaded = json.loads(tools_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{tools_path}: cannot read the tool list: {exc}") from exc
    tools = loaded.get("tools") if isinstance(loaded, dict) else loaded
    if not isinstance(tools, list) or not tools:
        raise DatasetError(f'{tools_path}: expected a JSON array of tools (or an object with a "tools" array)')
    return tools


def _tool_names(tools: list[dict[str, Any]], tools_path: Path) -> list[str]:
    names = []
    for number, tool in enumerate(tools, start=1):
        try:
            names.append(str(tool_fields(tool)["name"]))
        except ToolError as exc:
            raise DatasetError(f"{tools_path}: tool {number}: {exc}") from exc
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise DatasetError(f"{tools_path}: tool names must be unique; repeated: {repeated}")
    return names


def load_tool_set(queries_path: Path, tools_path: Path) -> tuple[list[dict[str, Any]], list[RetrievalQuery]]:
    tools = _tool_list(tools_path)
    names = set(_tool_names(tools, tools_path))
    try:
        lines = queries_path.read_text().splitlines()
    except OSError as exc:
        raise DatasetError(f"{queries_path}: cannot read the queries: {exc}") from exc
    queries = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{queries_path}:{number}: not valid JSON: {exc}") from exc
        if not isinstance(row, dict):
            raise DatasetError(f"{queries_path}:{number}: expected an object {{query, relevant}}")
        named = row.get("relevant") or ()
        relevant = (named,) if isinstance(named, str) else tuple(named)  # one tool may be given bare
        unknown = [r for r in relevant if r not in names]
        if not isinstance(row.get("query"), str) or not row["query"].strip() or not relevant or unknown:
            raise DatasetError(f"{queries_path}:{number}: needs a query and relevant tools that exist (unknown: {unknown})")
        queries.append(RetrievalQuery(row["query"], relevant))
    if not queries:
        raise DatasetError(f"{queries_path}: no queries")
    return tools, queries


def score(system: str, rankings: Sequence[Sequence[str]], queries: Sequence[RetrievalQuery]) -> RetrievalScore:
    """Rankings: tool names best first, one list per query."""
    recall = {k: float(np.mean([len(set(r[:k]) & set(q.relevant)) / len(q.relevant) for r, q in zip(rankings, queries)])) for k in CUTOFFS}
    reciprocal = []
    for ranking, query in zip(rankings, queries):
        ranks = [ranking.index(name) + 1 for name in query.relevant if name in ranking]
        reciprocal.append(1.0 / min(ranks) if ranks else 0.0)
    complete = float(np.mean([set(q.relevant) <= set(r[:5]) for r, q in zip(rankings, queries)]))
    return RetrievalScore(system, len(queries), recall, float(np.mean(reciprocal)), complete)


def _ranked(names: Sequence[str], scores: np.ndarray) -> list[list[str]]:
    return [[names[i] for i in np.argsort(-row, kind="stable")] for row in scores]


@dataclass(frozen=True)
class RankedSet:
    names: list[str]
    rankings: dict[str, list[list[str]]]
    cosines: np.ndarray  # queries x tools: what the service's threshold compares against (the best over a request's parts)
    # per ranking the service offers ("hybrid", "embedding"): queries x tools, each tool's confidence (tool_confidence)
    confidences: dict[ToolRanking, np.ndarray] = field(default_factory=dict)
    asks: list[int] = field(default_factory=list)  # per query: the separate asks the service finds and ranks for (select_tools' `needs`)


def rank_all(
    tools: Sequence[dict[str, Any]],
    queries: Sequence[RetrievalQuery],
    embed: Callable[[list[str], str], np.ndarray],
    max_chars: int,
    lexical_weight: float,
) -> RankedSet:
    """Each system's rankings from one pass of the encoder, keyed "hybrid" (what the service does),
    "hybrid-whole" (the same without ranking a request's parts), "hybrid-plain" (without the action
    words in the keyword text), "hybrid-unshaped" (without the identifiers' parameter words in the
    keyword query), "embedding", "bm25" (the request against the tools' own words: the baseline) and
    "bm25-actions" (with the action words)."""
    names = [str(tool_fields(t)["name"]) for t in tools]
    summaries, texts = zip(*(tool_texts(t, max_chars) for t in tools))
    plain_texts = [tool_texts(t, max_chars, with_action_words=False)[1] for t in tools]
    documents = embed(list(summaries), "document")
    parts = [[q.query[:max_chars], *request_clauses(q.query[:max_chars])] for q in queries]  # what ToolFilter embeds
    flat = embed([part for request in parts for part in request], "query") @ documents.T
    starts = np.cumsum([0] + [len(request) for request in parts])
    cosines = [flat[start:end] for start, end in zip(starts[:-1], starts[1:])]  # per query: the request, then its parts
    index = LexicalIndexes(capacity=2)
    lexical = [np.vstack([index.scores(texts, keyword_query(part)) for part in request]) for request in parts]
    plain = [np.vstack([index.scores(plain_texts, keyword_query(part)) for part in request]) for request in parts]
    unshaped = [np.vstack([index.scores(texts, part) for part in request]) for request in parts]
    whole_cosines = np.vstack([c[0] for c in cosines])
    whole_lexical = np.vstack([lx[0] for lx in lexical])
    own_words = bm25_scores(plain_texts, queries, max_chars, index)
    action_only = np.vstack([u[0] for u in unshaped])
    hybrid = [hybrid_ranking(c, lx, lexical_weight) for c, lx in zip(cosines, lexical)]
    embedding = [embedding_ranking(c[:1]) for c in cosines]  # the whole request's cosine order
    asks = [ask_count(request[1:]) for request in parts]
    confidences: dict[ToolRanking, np.ndarray] = {
        "hybrid": np.vstack([tool_confidences(r, n, "hybrid") for r, n in zip(hybrid, asks)]),
        "embedding": np.vstack([tool_confidences(r, 1, "embedding") for r in embedding]),
    }
    rankings = {
        "hybrid": [[names[i] for i in r.order] for r in hybrid],
        "hybrid-whole": _ranked(names, fuse(whole_cosines, whole_lexical, lexical_weight)),
        "hybrid-plain": [[names[i] for i in hybrid_order(c, p, lexical_weight)] for c, p in zip(cosines, plain)],
        "hybrid-unshaped": [[names[i] for i in hybrid_order(c, u, lexical_weight)] for c, u in zip(cosines, unshaped)],
        "embedding": [[names[i] for i in r.order] for r in embedding],
        "bm25": _ranked(names, own_words),
        "bm25-actions": _ranked(names, action_only),
    }
    return RankedSet(names, rankings, np.vstack([c.max(axis=0) for c in cosines]), confidences, asks)


CONFIDENCE_TOP = 10  # the tools per request whose confidence is checked: select_tools' default top_k


def render_confidence(ranked: RankedSet, queries: Sequence[RetrievalQuery], ranking: ToolRanking) -> str:
    """Whether select_tools' `confidence` means what it says: over the first ten tools of each request, the share that
    the request needs, per confidence bin, with the ECE and the AUROC (needed tools above the others)."""
    column = {name: i for i, name in enumerate(ranked.names)}
    said, needed = [], []
    for row, (order, query) in enumerate(zip(ranked.rankings[ranking], queries)):
        for name in order[:CONFIDENCE_TOP]:
            said.append(ranked.confidences[ranking][row, column[name]])
            needed.append(name in query.relevant)
    confidence, truth = np.asarray(said), np.asarray(needed)
    ece, bins = expected_calibration_error(confidence, truth.astype(float))
    lines = [
        f"confidence ({ranking}), first {CONFIDENCE_TOP} tools of {len(queries)} requests: ECE {ece:.3f}, "
        f"AUROC {auroc(confidence[truth], confidence[~truth]):.3f}",
        "",
        "| confidence | tools | mean confidence | share needed |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {b['lo']:.1f}-{b['hi']:.1f} | {b['count']} | {b['confidence']:.3f} | {b['accuracy']:.3f} |" for b in bins if b["count"]]
    return "\n".join(lines)


def render_needs(ranked: RankedSet, queries: Sequence[RetrievalQuery]) -> str:
    """How often select_tools' `needs` matches the tools a request needs (its asks found, at most two counted apart)."""
    lines = ["| requests | count | needs 1 | needs 2 or more |", "|---|---:|---:|---:|"]
    for label, wanted in (("needing one tool", lambda n: n == 1), ("needing two or more", lambda n: n > 1)):
        found = [asks for asks, query in zip(ranked.asks, queries) if wanted(len(query.relevant))]
        if found:
            several = sum(1 for asks in found if asks > 1)
            lines.append(f"| {label} | {len(found)} | {1 - several / len(found):.3f} | {several / len(found):.3f} |")
    return "\n".join(lines)


def bm25_scores(plain_texts: Sequence[str], queries: Sequence[RetrievalQuery], max_chars: int, index: LexicalIndexes) -> np.ndarray:
    """The baseline: each request's words against the tools' own words (no action words), queries x tools."""
    return np.vstack([index.scores(plain_texts, q.query[:max_chars]) for q in queries])


def bm25_rankings(tools: Sequence[dict[str, Any]], queries: Sequence[RetrievalQuery], max_chars: int) -> list[list[str]]:
    """rank_all's "bm25" rankings alone, without the encoder."""
    names = [str(tool_fields(t)["name"]) for t in tools]
    plain_texts = [tool_texts(t, max_chars, with_action_words=False)[1] for t in tools]
    return _ranked(names, bm25_scores(plain_texts, queries, max_chars, LexicalIndexes(capacity=1)))


@dataclass(frozen=True)
class ServedOutcome:
    threshold: float
    recall: float
    mean_kept: float
    empty: int  # requests that got no tool at all


def served_outcome(ranked: RankedSet, queries: Sequence[RetrievalQuery], top_k: int, threshold: float) -> ServedOutcome:
    """What a caller of select_tools gets: the hybrid order, cut at the threshold (on the cosine) and at top_k.

    Recall@k alone hides the threshold: with a threshold above a model's usual cosines, a good ranking
    still hands the router fewer tools than it needs, or none.
    """
    column = {name: i for i, name in enumerate(ranked.names)}
    recall, kept = [], []
    for row, (ranking, query) in enumerate(zip(ranked.rankings["hybrid"], queries)):
        selected = [name for name in ranking if ranked.cosines[row, column[name]] >= threshold][:top_k]
        recall.append(len(set(selected) & set(query.relevant)) / len(query.relevant))
        kept.append(len(selected))
    return ServedOutcome(threshold, float(np.mean(recall)), float(np.mean(kept)), sum(1 for k in kept if k == 0))


def render_served(outcomes: Sequence[ServedOutcome], top_k: int, default_threshold: float) -> str:
    lines = [
        f"| what a caller gets (hybrid, top_k {top_k}) | recall | tools kept (mean) | requests left with no tool |",
        "|---|---:|---:|---:|",
    ]
    for o in outcomes:
        label = ("no threshold (-1)" if o.threshold <= -1 else f"threshold {o.threshold:g}") + (
            " (the default for this model)" if o.threshold == default_threshold else ""
        )
        lines.append(f"| {label} | {o.recall:.3f} | {o.mean_kept:.1f} | {o.empty} |")
    return "\n".join(lines)


SLICE_SYSTEMS = ("hybrid", "hybrid-whole", "hybrid-unshaped", "embedding", "bm25")


def query_slices(queries: Sequence[RetrievalQuery]) -> dict[str, list[int]]:
    """Groups of queries that differ in how hard they are, so sets written in different styles compare.

    A query that says the server's name ("which asana workspaces…") is easier than one that does
    not, a request needing two tools is harder than one needing one, and a request that carries an
    identifier (a URL, a #channel, an issue key) gives BM25 its parameter's words. The server is the prefix
    before `__` in a tool's name, the way MCP gateways namespace tools; without such prefixes only
    the tool-count slices are given.
    """
    slices: dict[str, list[int]] = {"needs one tool": [], "needs two or more": []}
    for i, query in enumerate(queries):
        slices["needs one tool" if len(query.relevant) == 1 else "needs two or more"].append(i)
    several = slices["needs two or more"]
    if several:  # a request that says its asks apart ("... and then ...") against one that fuses them in one clause
        slices["two or more, said apart (query_clauses splits it)"] = [i for i in several if request_clauses(queries[i].query)]
        slices["two or more, in one clause"] = [i for i in several if not request_clauses(queries[i].query)]
    carrying = [i for i, query in enumerate(queries) if identifier_words(query.query)]
    if carrying:
        slices["carries an identifier"] = carrying
        slices["carries none"] = sorted(set(range(len(queries))) - set(carrying))
    if all("__" in name for query in queries for name in query.relevant):
        named: list[int] = []
        unnamed: list[int] = []
        for i, query in enumerate(queries):
            text = query.query.lower().replace("_", " ")
            servers = {name.split("__", 1)[0].lower().replace("_", " ") for name in query.relevant}
            (named if any(server in text for server in servers) else unnamed).append(i)
        slices["names the server"] = named
        slices["does not name it"] = unnamed
    return {name: members for name, members in slices.items() if members}


def render_slices(rankings: dict[str, list[list[str]]], queries: Sequence[RetrievalQuery]) -> str:
    """Recall@5 of each system per slice, and the share of requests with every needed tool in hybrid's top 5:
    where the ranking wins and loses."""
    lines = [
        "| slice | queries | "
        + " | ".join(f"{system} recall@5" for system in SLICE_SYSTEMS)
        + " | hybrid: every needed tool in the top 5 |",
        "|---|---:|" + "---:|" * (len(SLICE_SYSTEMS) + 1),
    ]
    for name, members in query_slices(queries).items():
        subset = [queries[i] for i in members]
        scores = {system: score(system, [rankings[system][i] for i in members], subset) for system in SLICE_SYSTEMS}
        cells = [f"{scores[system].recall[5]:.3f}" for system in SLICE_SYSTEMS] + [f"{scores['hybrid'].complete:.3f}"]
        lines.append(f"| {name} | {len(members)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(scores: Sequence[RetrievalScore], tools: int) -> str:
    lines = [
        "| system | queries | tools | recall@1 | recall@5 | recall@10 | MRR | every needed tool in the top 5 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in scores:
        lines.append(
            f"| {s.system} | {s.queries} | {tools} | {s.recall[1]:.3f} | {s.recall[5]:.3f} | {s.recall[10]:.3f} | {s.mrr:.3f} "
            f"| {s.complete:.3f} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class FeedbackSplit:
    """A set's one-tool requests split per tool: the first ones given as feedback from use, the rest measured."""

    past: list[RetrievalQuery]
    held: list[RetrievalQuery]
    tools: int  # tools given feedback


def feedback_split(queries: Sequence[RetrievalQuery], per_tool: int) -> FeedbackSplit:
    """Up to ``per_tool`` of each tool's one-tool requests, never more than half of them, are its past requests;
    every other one-tool request (those of tools with a single request too) is measured. Requests that need
    several tools are left out: which of their tools the model would have called is not known."""
    by_tool: dict[str, list[RetrievalQuery]] = {}
    for query in queries:
        if len(query.relevant) == 1:
            by_tool.setdefault(query.relevant[0], []).append(query)
    past: list[RetrievalQuery] = []
    held: list[RetrievalQuery] = []
    given = 0
    for requests in by_tool.values():
        count = min(per_tool, len(requests) // 2)
        past.extend(requests[:count])
        held.extend(requests[count:])
        given += count > 0
    return FeedbackSplit(past, held, given)


def feedback_rankings(
    tools: Sequence[dict[str, Any]],
    split: FeedbackSplit,
    embed: Callable[[list[str], str], np.ndarray],
    max_chars: int,
    lexical_weights: tuple[float, float],
) -> tuple[list[list[str]], list[list[str]]]:
    """The hybrid rankings of the measured requests (``split.held``) without and with the lift of the past requests
    (``split.past``), as ToolFilter ranks.

    ``lexical_weights``: BM25's share (tool_lexical_weight), then the past requests' (tool_feedback_weight).
    """
    lexical_weight, past_weight = lexical_weights
    names = [str(tool_fields(t)["name"]) for t in tools]
    column = {name: i for i, name in enumerate(names)}
    summaries, texts = zip(*(tool_texts(t, max_chars) for t in tools))
    documents = embed(list(summaries), "document")
    owners = np.asarray([column[q.relevant[0]] for q in split.past], dtype=np.int64)
    order = np.argsort(owners, kind="stable")
    past_vectors = embed([q.query[:max_chars] for q in split.past], "query") if split.past else np.zeros((0, documents.shape[1]))
    past = PastQueries(np.asarray(past_vectors, dtype=np.float32)[order], owners[order])
    parts = [[q.query[:max_chars], *request_clauses(q.query[:max_chars])] for q in split.held]
    flat = embed([part for request in parts for part in request], "query")
    starts = np.cumsum([0] + [len(request) for request in parts])
    index = LexicalIndexes(capacity=1)
    without, with_past = [], []
    for request, start, end in zip(parts, starts[:-1], starts[1:]):
        vectors = flat[start:end]
        cosines = vectors @ documents.T
        lexical = np.vstack([index.scores(texts, keyword_query(part)) for part in request])
        without.append([names[i] for i in hybrid_order(cosines, lexical, lexical_weight)])
        with_past.append([names[i] for i in hybrid_order(cosines, lexical, lexical_weight, lift(cosines, vectors, past, past_weight))])
    return without, with_past
