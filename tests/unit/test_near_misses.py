"""The out-of-scope candidates doctor proposes: words picked from a file, queries built from them, and the listing.

No model: the file and the in-scope probabilities are written here, so which candidate comes first, and under which
category, is checked by hand.
"""

from __future__ import annotations

import numpy as np

from mcp_classifier.classify.categories import CategoryConfig
from mcp_classifier.evaluation.doctor import Diagnosis, render
from mcp_classifier.evaluation.near_misses import (
    BACKGROUND,
    BUILT,
    FRAMES,
    PER_SOURCE_LISTED,
    WORDS_PER_CATEGORY,
    Candidate,
    built_queries,
    candidate_texts,
    distinctive_words,
    propose,
)

BANK = CategoryConfig.model_validate(
    {
        "out_of_scope_examples": ["tell me a joke about loan"],
        "categories": [
            {
                "name": "loans",
                "description": "Loans and mortgages from the bank",
                "examples": ["apply for a car loan", "what is my loan rate", "can I get a mortgage from the bank"],
            },
            {
                "name": "cards",
                "description": "Debit and credit cards from the bank",
                "examples": ["my card was declined", "order a new debit card", "freeze my cards"],
            },
        ],
    }
)


def test_distinctive_words_are_a_categorys_own_not_stop_words_nor_shared_ones() -> None:
    loans, cards = distinctive_words(BANK)
    assert loans[0] == "loan" and cards[0] == "card"  # in every text of its category, in no other
    assert len(loans) == len(cards) == WORDS_PER_CATEGORY
    assert "cards" not in cards  # a plural beside its singular is the same word
    assert not {"bank", "from", "the", "my"} & set(loans + cards)  # in both categories, or a stop word


def test_built_queries_put_each_word_in_every_frame() -> None:
    built = built_queries(BANK)
    assert len(built) == 2 * WORDS_PER_CATEGORY * len(FRAMES)
    assert FRAMES[0].format(word="loan") in built and FRAMES[-1].format(word="card") in built


def test_candidates_leave_out_what_the_file_already_says_and_repeats() -> None:
    texts, sources = candidate_texts(BANK, ["what's the weather", "Apply for a car loan", "what's the weather"])
    assert "tell me a joke about loan" not in texts  # already one of the file's out_of_scope_examples
    assert "Apply for a car loan" not in texts  # one of its examples, in other case
    assert texts.count("what's the weather") == 1 and sources[texts.index("what's the weather")] == BACKGROUND
    assert set(sources) == {BUILT, BACKGROUND}


def test_propose_lists_the_riskiest_first_under_the_nearest_category() -> None:
    texts = [f"t{i}" for i in range(6)]
    sources = [BUILT, BUILT, BUILT, BUILT, BACKGROUND, BACKGROUND]
    probability = np.array([0.2, 0.9, 0.6, 0.7, 0.3, 0.1])
    similarities = np.array([[0.5, 0.1], [0.4, 0.2], [0.3, 0.1], [0.2, 0.3], [0.1, 0.4], [0.6, 0.2]])
    proposed = propose(["loans", "cards"], texts, sources, probability, similarities)
    assert proposed == [
        Candidate("loans", "t1", BUILT, 0.9),
        Candidate("loans", "t2", BUILT, 0.6),
        Candidate("loans", "t0", BUILT, 0.2),
        Candidate("loans", "t5", BACKGROUND, 0.1),
        Candidate("cards", "t3", BUILT, 0.7),
        Candidate("cards", "t4", BACKGROUND, 0.3),
    ]
    many = propose(["loans"], texts, [BUILT] * 6, probability, similarities[:, :1])
    assert len(many) == PER_SOURCE_LISTED


def test_the_report_marks_the_candidates_the_classifier_takes_in_scope() -> None:
    diagnosis = Diagnosis("knn", 2, 2, 6, 1.0, 0.0, 0.0, [], [], [])
    diagnosis.candidates = [Candidate("loans", "a song about loan", BUILT, 0.8), Candidate("cards", "hi | there", BACKGROUND, 0.1)]
    text = render(diagnosis)
    assert "## Candidate out-of-scope examples" in text and "1 of 2 would be taken in scope" in text
    assert "| loans | a song about loan | built from your words | 0.80 (in scope) |" in text
    assert "| cards | hi / there | background | 0.10 |" in text
