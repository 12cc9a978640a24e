"""The whole run of `mcp-classifier doctor` and `eval-tools`: settings and paths in, the report printed.

The CLI parses flags and calls these; loading data, building the model and scoring belong to the evaluation,
so a script or a test runs the same check without going through argparse. A problem with the input files is
a DatasetError, which the CLI turns into its one-line error.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..classify.build import build_classifier, build_registry
from ..classify.categories import CategoryConfig
from ..classify.index import category_texts
from ..classify.registry import ClassifierRegistry
from ..classify.scope import background_queries
from ..settings import Settings
from ..toolfilter.tool_filter import DEFAULT_THRESHOLD, DEFAULT_TOP_K, default_threshold_for
from . import doctor, near_misses, tool_retrieval
from .dataset import OUT_OF_SCOPE, DatasetError, LabelledQuery, accepted_labels, load_dataset, query_topics
from .metrics import second_label_metrics
from .systems import predict_local

if TYPE_CHECKING:
    from ..classify.classifier import Classifier


def run_doctor(settings: Settings, queries_path: Path | None, out: Path | None) -> None:
    """Diagnose the categories file (and, given labelled queries, how they would be answered); print the report."""
    registry = ClassifierRegistry.read(settings.categories)  # the file checked before the model loads
    config = registry.config()
    queries = _doctor_queries(queries_path, config) if queries_path is not None else None
    source = registry.source().describe()
    categories = settings.categories
    print(
        f"doctor: {source}: {len(config.categories)} categories, scoring method {categories.scoring_method}, "
        f"lexical scoring {categories.lexical_scoring}, token matching {categories.token_matching}, "
        f"middle layer features {categories.middle_layer_features}",
        file=sys.stderr,
    )
    classifier = build_registry(settings, registry).get()
    diagnosis, example_vectors, description_vectors = _diagnose(settings, classifier, config, queries)
    print(doctor.render(diagnosis))
    if out is not None:
        similarity = doctor.centroid_similarity(config, example_vectors, description_vectors)
        report = doctor.write_report(diagnosis, out, config, similarity, source)
        print(f"\nreport: {report}", file=sys.stderr)


def _doctor_queries(path: Path, config: CategoryConfig) -> list[LabelledQuery]:
    """The labelled queries doctor scores, read as eval reads them: a null label marks an out-of-scope query."""
    queries = load_dataset(path)
    unknown = sorted({q.category for q in queries if q.category != OUT_OF_SCOPE} - set(config.names))
    if unknown:
        raise DatasetError(f"{path} has categories the file does not define: {unknown}")
    return queries


def _diagnose(
    settings: Settings, classifier: Classifier, config: CategoryConfig, queries: Sequence[LabelledQuery] | None
) -> tuple[doctor.Diagnosis, np.ndarray, np.ndarray]:
    """Embed the file's examples, descriptions and queries with the served model and diagnose them.

    The scorer's own figures are on the queries with a category; the out-of-scope figures on all of them, as the
    classifier serves them (eval's figures: a query labelled null is right when answered out of scope)."""
    categories = settings.categories
    encoder = classifier.encoder
    scored = [q for q in queries or () if q.category != OUT_OF_SCOPE]
    examples = [e for c in config.categories for e in c.examples]
    example_vectors = encoder.encode_documents(examples)
    description_vectors = encoder.encode_documents([c.description or c.name for c in config.categories])
    tokens = None
    if categories.token_matching != "off":
        tokens = doctor.TokenVectors(
            encoder.encode_with_tokens(examples, query=False)[1],
            encoder.encode_with_tokens(category_texts(config), query=False)[1],
            encoder.encode_with_tokens([q.text for q in scored], query=True)[1] if scored else [],
        )
    diagnosis = doctor.diagnose(
        config,
        example_vectors,
        description_vectors,
        categories.scoring_method,
        encoder.encode_queries([q.text for q in scored]) if scored else None,
        [q.category for q in scored] if scored else None,
        [q.text for q in scored] if scored else None,
        categories.lexical_scoring,
        tokens,
    )
    scope = classifier.info.scope
    diagnosis.scope = scope.to_public(config.names) if scope is not None else None
    diagnosis.candidates = _out_of_scope_candidates(classifier, config)
    if queries:
        texts = [q.text for q in queries]
        answers = predict_local(classifier.classify, texts, settings.batching.batch_size)
        truth = accepted_labels(queries, [answer.category for answer in answers])  # as eval scores them
        diagnosis.query_scope = doctor.query_scope(truth, texts, answers)
        diagnosis.query_labels = second_label_metrics(query_topics(queries), answers)
    return diagnosis, example_vectors, description_vectors


def _out_of_scope_candidates(classifier: Classifier, config: CategoryConfig) -> list[near_misses.Candidate]:
    """The near-miss candidates doctor proposes, scored by the served scope model; none where detection is off."""
    scope = classifier.state[1].scope
    if scope is None:
        return []
    texts, sources = near_misses.candidate_texts(config, background_queries())
    probability, similarities = scope.in_scope_probability(np.asarray(classifier.encoder.encode_queries(texts)))
    return near_misses.propose(config.names, texts, sources, probability, similarities)


def run_eval_tools(settings: Settings, queries_path: Path, tools_path: Path | None, feedback: int | None = None) -> None:
    """Score the tool filter's rankings (and BM25 beside them) on labelled tool queries; print the tables. ``feedback``:
    also give that many of each tool's requests as feedback from use and score the rest with and without it."""
    tools_path = tools_path or queries_path.with_name("tools.json")
    tools, queries = tool_retrieval.load_tool_set(queries_path, tools_path)
    print(f"eval-tools: {len(queries)} queries over {len(tools)} tools ({tools_path})", file=sys.stderr)
    classifier = build_classifier(settings)
    toolfilter = settings.toolfilter
    model = settings.model.name
    ranked = tool_retrieval.rank_all(tools, queries, classifier.embed, settings.serving.max_text_length, toolfilter.tool_lexical_weight)
    rankings = ranked.rankings
    served = f" (tool_ranking={toolfilter.tool_ranking}: what the service ranks with)"
    systems = [
        (
            f"hybrid: {model} + BM25, weight {toolfilter.tool_lexical_weight:g}" + served * (toolfilter.tool_ranking == "hybrid"),
            "hybrid",
        ),
        ("hybrid without ranking a request's parts (tool_query_clauses)", "hybrid-whole"),
        ("hybrid without the action words (tool_actions)", "hybrid-plain"),
        ("hybrid without the identifiers' parameter words (query_identifiers)", "hybrid-unshaped"),
        (f"embeddings {model} alone" + served * (toolfilter.tool_ranking == "embedding"), "embedding"),
        ("BM25 (rank-bm25), the tools' own words", "bm25"),
        ("BM25 with the action words", "bm25-actions"),
    ]
    scores = [tool_retrieval.score(name, rankings[key], queries) for name, key in systems]
    print(tool_retrieval.render(scores, len(tools)))
    print()
    print(tool_retrieval.render_slices(rankings, queries))
    tool_threshold = toolfilter.tool_threshold
    default_threshold = tool_threshold if tool_threshold is not None else default_threshold_for(model)
    thresholds = sorted({default_threshold, DEFAULT_THRESHOLD, -1.0})
    outcomes = [tool_retrieval.served_outcome(ranked, queries, DEFAULT_TOP_K, t) for t in thresholds]
    print()
    print(tool_retrieval.render_served(outcomes, DEFAULT_TOP_K, default_threshold))
    print()
    print(tool_retrieval.render_confidence(ranked, queries, toolfilter.tool_ranking))
    print()
    print(tool_retrieval.render_needs(ranked, queries))
    if feedback is not None:
        print()
        print(_feedback_table(settings, tools, queries, classifier.embed, feedback))


def _feedback_table(
    settings: Settings,
    tools: Sequence[dict[str, Any]],
    queries: Sequence[tool_retrieval.RetrievalQuery],
    embed: Callable[[list[str], str], np.ndarray],
    per_tool: int,
) -> str:
    """One-tool requests ranked without and with feedback from ``per_tool`` past requests of each tool."""
    if per_tool < 1:
        raise DatasetError(f"--feedback {per_tool}: give at least one past request per tool")
    split = tool_retrieval.feedback_split(queries, per_tool)
    if not split.tools:
        raise DatasetError("no tool has two one-tool requests: feedback from use needs some to give and some to measure")
    toolfilter = settings.toolfilter
    weights = (toolfilter.tool_lexical_weight, toolfilter.tool_feedback_weight)
    max_chars = settings.serving.max_text_length
    without, with_past = tool_retrieval.feedback_rankings(tools, split, embed, max_chars, weights)
    again = tool_retrieval.FeedbackSplit(split.past, split.past, split.tools)  # the past requests, asked again
    again_without, again_with = tool_retrieval.feedback_rankings(tools, again, embed, max_chars, weights)
    print(
        f"eval-tools: feedback from {len(split.past)} requests ({per_tool} per tool at most, half of its requests at most) "
        f"for {split.tools} tools; {len(split.held)} other one-tool requests measured",
        file=sys.stderr,
    )
    weight = f"tool_feedback_weight {toolfilter.tool_feedback_weight:g}"
    scores = [
        tool_retrieval.score("hybrid, one-tool requests not given as feedback: no feedback", without, split.held),
        tool_retrieval.score(f"the same with feedback from {per_tool} past requests per tool ({weight})", with_past, split.held),
        tool_retrieval.score("the requests given as feedback, asked again word for word: no feedback", again_without, split.past),
        tool_retrieval.score(f"the same with their own feedback ({weight})", again_with, split.past),
        tool_retrieval.score(
            "BM25 (rank-bm25), the tools' own words, on the requests not given as feedback",
            tool_retrieval.bm25_rankings(tools, split.held, max_chars),
            split.held,
        ),
    ]
    return tool_retrieval.render(scores, len(tools))
