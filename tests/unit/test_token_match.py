"""Token matches beside the embeddings: MaxSim per category bag, its out-of-fold scores, the bag's summary,
and the weight the fusion picks for them.

Synthetic token vectors stand in for the encoder so each test controls which side carries the signal.
"""

from __future__ import annotations

import numpy as np
import pytest

from mcp_classifier.classify.fusion import fit_category_scorer
from mcp_classifier.classify.token_match import CategoryTokens

DIMENSIONS = 24
CATEGORY_TEXTS = ["billing", "shipping", "returns"]


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def brute_force_maxsim(query: np.ndarray, bag: np.ndarray) -> float:
    return float(np.mean([max(float(q @ b) for b in bag) for q in query]))


def test_scores_are_the_z_scored_mean_of_each_query_token_s_best_match() -> None:
    rng = np.random.default_rng(0)
    own = [unit(rng.normal(size=(2, DIMENSIONS))) for _ in range(3)]
    examples = [unit(rng.normal(size=(n, DIMENSIONS))) for n in (3, 5, 1, 4, 2)]
    labels = np.array([0, 1, 1, 2, 0])
    tokens = CategoryTokens(own, examples, labels)
    queries = [unit(rng.normal(size=(n, DIMENSIONS))) for n in (1, 4, 7)]
    raw = np.array(
        [
            [brute_force_maxsim(q, np.vstack([own[c]] + [e for e, label in zip(examples, labels) if label == c])) for c in range(3)]
            for q in queries
        ]
    )
    expected = (raw - raw.mean(axis=1, keepdims=True)) / raw.std(axis=1, keepdims=True)
    np.testing.assert_allclose(tokens.scores(queries), expected, rtol=1e-5, atol=1e-5)


def test_a_query_token_close_to_one_category_s_word_scores_highest_there() -> None:
    rng = np.random.default_rng(1)
    words = unit(rng.normal(size=(3, DIMENSIONS)))  # one deciding word per category
    filler = unit(rng.normal(size=(4, DIMENSIONS)))  # words every category shares
    examples = [np.vstack([words[c], filler]) for c in range(3) for _ in range(2)]
    tokens = CategoryTokens([filler[:1]] * 3, examples, np.repeat(np.arange(3), 2))
    near_word_2 = unit(words[2] + 0.3 * unit(rng.normal(size=DIMENSIONS)))
    scores = tokens.scores([np.vstack([filler[1], near_word_2]), filler[2:3]])
    assert scores[0].argmax() == 2
    np.testing.assert_allclose(scores[1], 0.0, atol=1e-6)  # only shared words: no preference, not a random one


def test_out_of_fold_bags_leave_the_fold_s_own_tokens_out() -> None:
    rng = np.random.default_rng(2)
    unique = unit(rng.normal(size=(1, DIMENSIONS)))
    shared = unit(rng.normal(size=(1, DIMENSIONS)))
    examples = [unique, shared, shared, shared]  # the first example's token appears nowhere else
    labels = np.array([0, 0, 1, 2])
    tokens = CategoryTokens([np.zeros((0, DIMENSIONS))] * 3, examples, labels)
    assert tokens.scores([unique])[0].argmax() == 0  # the full bag holds it
    out_of_fold = tokens.out_of_fold([np.array([0]), np.array([1, 2, 3])])
    np.testing.assert_allclose(out_of_fold[0], 0.0, atol=1e-3)  # without its own token, categories 0, 1 and 2 all hold only `shared`
    assert tokens.size == 4


def test_a_category_with_no_tokens_scores_lowest_not_a_neighbour_s_score() -> None:
    rng = np.random.default_rng(3)
    examples = [unit(rng.normal(size=(3, DIMENSIONS))) for _ in range(2)]
    tokens = CategoryTokens([np.zeros((0, DIMENSIONS))] * 3, examples, np.array([0, 2]))  # category 1 is empty
    scores = tokens.scores([examples[1]])
    assert scores[0].argmax() == 2 and scores[0, 1] == scores[0].min()


def test_a_category_with_more_tokens_than_the_limit_is_summarised_to_it() -> None:
    rng = np.random.default_rng(4)
    centres = unit(rng.normal(size=(3, DIMENSIONS)))
    examples = [unit(centres[c] + 0.05 * rng.normal(size=(40, DIMENSIONS))) for c in range(3)]
    tokens = CategoryTokens([np.zeros((0, DIMENSIONS))] * 3, examples, np.arange(3), tokens_per_category=8)
    assert tokens.size == 24 and np.allclose(np.linalg.norm(tokens.bag, axis=1), 1.0, atol=1e-5)
    exact = CategoryTokens([np.zeros((0, DIMENSIONS))] * 3, examples, np.arange(3), tokens_per_category=0)
    queries = [unit(centres[c] + 0.05 * rng.normal(size=(3, DIMENSIONS))) for c in range(3)]
    assert list(tokens.scores(queries).argmax(axis=1)) == list(exact.scores(queries).argmax(axis=1)) == [0, 1, 2]


def few_shot_tokens(
    rng: np.random.Generator, words: np.ndarray, filler: np.ndarray, per_category: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """Texts whose category shows only in one token among filler tokens."""
    texts, labels = [], []
    for c in range(len(words)):
        for _ in range(per_category):
            noisy_word = unit(words[c] + 0.2 * unit(rng.normal(size=DIMENSIONS)))
            texts.append(np.vstack([noisy_word, filler[rng.choice(len(filler), size=4)]]))
            labels.append(c)
    return texts, np.array(labels)


def test_tokens_that_decide_the_category_get_a_weight_and_lift_accuracy() -> None:
    rng = np.random.default_rng(5)
    words, filler = unit(rng.normal(size=(3, DIMENSIONS))), unit(rng.normal(size=(6, DIMENSIONS)))
    examples, labels = few_shot_tokens(rng, words, filler, per_category=8)
    vectors = unit(rng.normal(size=(len(labels), 16)))  # pooled embeddings that know nothing
    descriptions = unit(rng.normal(size=(3, 16)))
    texts = [f"text {i}" for i in range(len(labels))]
    tokens = CategoryTokens([np.zeros((0, DIMENSIONS))] * 3, examples, labels)
    fused = fit_category_scorer("neighbours", vectors, texts, labels, descriptions, CATEGORY_TEXTS, "off", tokens)
    alone = fit_category_scorer("neighbours", vectors, texts, labels, descriptions, CATEGORY_TEXTS, "off")
    assert fused.token_weight > 0 and fused.uses_tokens and fused.method == "neighbours+tokens" and not alone.uses_tokens
    queries, truth = few_shot_tokens(np.random.default_rng(6), words, filler, per_category=5)
    query_vectors = unit(rng.normal(size=(len(truth), 16)))
    query_texts = [f"query {i}" for i in range(len(truth))]
    right = (fused.probabilities(query_vectors, query_texts, queries).argmax(axis=1) == truth).mean()
    right_alone = (alone.probabilities(query_vectors, query_texts).argmax(axis=1) == truth).mean()
    assert right >= 0.9 and right > right_alone + 0.3, (right, right_alone)
    with pytest.raises(ValueError, match="token vectors"):
        fused.probabilities(query_vectors, query_texts)  # a caller that forgot the tokens hears so, not a silent fallback


def test_tokens_that_say_nothing_rarely_get_a_weight_and_cost_little_when_they_do() -> None:
    """The one-standard-error rule lets chance through now and then (two of these twelve files, as with BM25's
    weight): where it does, the weight it lets through moves few answers the embeddings got right."""
    weighted = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        labels = np.repeat(np.arange(3), 40)
        centres = unit(rng.normal(size=(3, 16)))
        vectors = unit(centres[labels] + 0.3 * rng.normal(size=(len(labels), 16)))  # embeddings that separate the categories
        vocabulary = unit(rng.normal(size=(200, DIMENSIONS)))
        examples = [vocabulary[rng.choice(200, size=6)] for _ in labels]  # tokens drawn regardless of the category
        tokens = CategoryTokens([np.zeros((0, DIMENSIONS))] * 3, examples, labels)
        texts = [f"text {i}" for i in range(len(labels))]
        fused = fit_category_scorer("neighbours", vectors, texts, labels, centres, CATEGORY_TEXTS, "off", tokens)
        truth = np.repeat(np.arange(3), 20)
        queries = unit(centres[truth] + 0.3 * rng.normal(size=(len(truth), 16)))
        query_tokens = [vocabulary[rng.choice(200, size=6)] for _ in truth]
        query_texts = [f"query {i}" for i in range(len(truth))]
        if fused.token_weight == 0:
            assert fused.method == "neighbours" and not fused.uses_tokens
            np.testing.assert_array_equal(fused.probabilities(queries, query_texts, query_tokens), fused.embedding.probabilities(queries))
        else:
            weighted += 1
        alone = (fused.embedding.probabilities(queries).argmax(axis=1) == truth).mean()
        assert (fused.probabilities(queries, query_texts, query_tokens).argmax(axis=1) == truth).mean() >= alone - 0.05
    assert weighted <= 2
