"""Word matches beside the embeddings: BM25 per category, its out-of-fold scores, and the weight chosen from them.

Synthetic vectors stand in for the encoder so each test controls which side carries the signal.
"""

from __future__ import annotations

import numpy as np
import pytest

from mcp_classifier.classify.fusion import fit_category_scorer
from mcp_classifier.classify.lexical import CategoryLexicon, words, zscores

CATEGORY_TEXTS = ["billing invoices charges", "shipping parcels couriers", "returns refunds exchanges"]
JARGON = [["vat", "iban", "swift", "ledger", "invoice", "surcharge"], ["dhl", "ups", "fedex", "tracking", "customs", "pallet"],
          ["rma", "restocking", "exchange", "warranty", "refund", "voucher"]]  # fmt: skip
FILLER = "please help me with this thing today".split()


def few_shot_file(rng: np.random.Generator, per_category: int = 8) -> tuple[list[str], np.ndarray]:
    """Examples whose category shows only in one or two jargon words among filler words."""
    texts, labels = [], []
    for c, jargon in enumerate(JARGON):
        for _ in range(per_category):
            chosen = list(rng.choice(jargon, size=2, replace=False)) + list(rng.choice(FILLER, size=4))
            rng.shuffle(chosen)
            texts.append(" ".join(chosen))
            labels.append(c)
    return texts, np.array(labels)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_a_query_with_a_category_s_rare_word_scores_highest_there() -> None:
    texts, labels = ["what is the vat on this", "where is my dhl parcel", "how do i get an rma"], np.array([0, 1, 2])
    lexicon = CategoryLexicon(CATEGORY_TEXTS, texts, labels)
    scores = lexicon.scores(["vat number on the invoice", "rma form", "sunny weather outside"])
    assert scores[0].argmax() == 0 and scores[1].argmax() == 2
    np.testing.assert_allclose(scores[2], 0.0)  # no word matches: no preference, not a random one


def test_out_of_fold_scores_take_the_fold_s_own_words_out_of_its_category() -> None:
    texts = ["iban transfer failed", "card declined", "parcel late", "parcel lost", "refund please"]
    labels = np.array([0, 0, 1, 1, 2])
    lexicon = CategoryLexicon(["billing", "shipping", "returns"], texts, labels)
    loo = lexicon.out_of_fold([np.array([i]) for i in range(len(texts))])  # one example per fold: leave-one-out
    # "iban" and "transfer" and "failed" occur only in the first example: without it, billing has none of them.
    np.testing.assert_allclose(loo[0], 0.0)
    # "parcel" stays in shipping through the other example, so each parcel example still leans to shipping.
    assert loo[2].argmax() == 1 and loo[3].argmax() == 1
    assert lexicon.documents[0] == words("billing iban transfer failed card declined")  # the full index is untouched


def test_words_that_decide_the_category_get_a_weight_and_lift_accuracy() -> None:
    rng = np.random.default_rng(1)
    texts, labels = few_shot_file(rng)
    vectors = unit(rng.normal(size=(len(texts), 16)))  # embeddings that know nothing
    descriptions = unit(rng.normal(size=(3, 16)))
    fused = fit_category_scorer("neighbours", vectors, texts, labels, descriptions, CATEGORY_TEXTS, "auto")
    alone = fit_category_scorer("neighbours", vectors, texts, labels, descriptions, CATEGORY_TEXTS, "off")
    assert fused.weight > 0 and fused.method == "neighbours+bm25" and alone.weight == 0
    queries, truth = few_shot_file(np.random.default_rng(2), per_category=5)
    query_vectors = unit(rng.normal(size=(len(queries), 16)))
    right = (fused.probabilities(query_vectors, queries).argmax(axis=1) == truth).mean()
    right_alone = (alone.probabilities(query_vectors, queries).argmax(axis=1) == truth).mean()
    assert right >= 0.9 and right > right_alone + 0.3, (right, right_alone)
    assert fused.held_out_accuracy >= 0.9  # what /health's held-out accuracy reports: the fused, out-of-fold figure


@pytest.mark.parametrize("seed", range(6))
def test_words_that_say_nothing_get_weight_zero_and_change_nothing(seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(3), 40)  # enough examples that chance word-label links stay small
    centres = unit(rng.normal(size=(3, 16)))
    vectors = unit(centres[labels] + 0.3 * rng.normal(size=(len(labels), 16)))  # embeddings that separate the categories
    vocabulary = [f"word{i}" for i in range(200)]
    texts = [" ".join(rng.choice(vocabulary, size=6)) for _ in labels]  # words drawn regardless of the category
    fused = fit_category_scorer("neighbours", vectors, texts, labels, centres, CATEGORY_TEXTS, "auto")
    assert fused.weight == 0 and fused.method == "neighbours"
    queries = unit(centres[[0, 1, 2]] + 0.3 * rng.normal(size=(3, 16)))
    np.testing.assert_array_equal(fused.probabilities(queries, ["word1", "word2", "word3"]), fused.embedding.probabilities(queries))


@pytest.mark.parametrize("lexical", ["auto", "off"])
def test_probabilities_stay_a_distribution(lexical: str) -> None:
    rng = np.random.default_rng(4)
    texts, labels = few_shot_file(rng)
    vectors = unit(rng.normal(size=(len(texts), 16)))
    scorer = fit_category_scorer("linear", vectors, texts, labels, unit(rng.normal(size=(3, 16))), CATEGORY_TEXTS, lexical)  # type: ignore[arg-type]
    p = scorer.probabilities(unit(rng.normal(size=(4, 16))), ["vat", "", "😀 émoji", "dhl ups"])
    assert p.shape == (4, 3) and np.all(p >= 0) and np.allclose(p.sum(axis=1), 1.0)


def test_cached_word_scores_equal_rank_bm25_scoring_each_query_itself() -> None:
    rng = np.random.default_rng(5)
    texts, labels = few_shot_file(rng)
    lexicon = CategoryLexicon(CATEGORY_TEXTS, texts, labels)
    queries = ["vat vat invoice please", "dhl tracking for my pallet", "", "😀", "unknown words only", "refund refund refund"]
    expected = zscores(np.array([lexicon.index.get_scores(words(q)) for q in queries]))
    np.testing.assert_allclose(lexicon.scores(queries), expected, atol=1e-12)
