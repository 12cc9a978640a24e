"""Out-of-scope answers, the fallback category, several labels and threshold overrides, on the real model.

A support bot's own categories (written here), builtin:minilm in process, the packaged background set:
what a router relies on is that chit-chat against these categories is said to be out of scope with a
confidence under the Semantic Router's 0.5 fallback, routed to the fallback category's model, while
its own traffic stays in scope.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from mcp_classifier.classify.build import build_classifier
from mcp_classifier.classify.classifier import Classifier
from mcp_classifier.evaluation.dataset import OUT_OF_SCOPE, load_dataset
from mcp_classifier.evaluation.metrics import Prediction, scope_metrics
from mcp_classifier.settings import Settings

SUPPORT_BOT = {
    "fallback": "human_handoff",
    "categories": [
        {
            "name": "billing",
            "description": "Invoices, charges, refunds, payment methods and subscription plans.",
            "model": "billing-model",
            "examples": [
                "I was charged twice this month",
                "How do I get a refund for my subscription?",
                "Where can I download my invoices?",
                "Can I pay by bank transfer instead of card?",
                "Why did my plan price go up?",
                "Update the credit card on my account",
            ],
        },
        {
            "name": "login",
            "description": "Signing in, passwords, two-factor authentication and locked accounts.",
            "model": "account-model",
            "examples": [
                "I can't log in to my account",
                "Reset my password please",
                "My two-factor code never arrives",
                "My account is locked after too many attempts",
                "How do I change the email I sign in with?",
                "The login page keeps saying invalid credentials",
            ],
        },
        {
            "name": "bug_report",
            "description": "Errors, crashes and features of the app that do not work as they should.",
            "model": "engineering-model",
            "examples": [
                "The app crashes when I upload a file",
                "Export to CSV gives an empty file",
                "I get error 500 when saving my settings",
                "The dashboard charts don't load",
                "Notifications stopped working after the update",
                "Search returns nothing even for exact names",
            ],
        },
        {
            "name": "human_handoff",
            "description": "Asking to talk to a person on the support team.",
            "model": "human-queue",
            "examples": [
                "Can I talk to a human?",
                "Put me through to an agent",
                "I want to speak with someone from support",
                "Is there a phone number I can call?",
                "Get me a real person please",
                "Connect me to customer service staff",
            ],
        },
    ],
}
CHIT_CHAT = [
    "hey, how's your day going?",
    "tell me a joke about penguins",
    "who won the world cup in 2010?",
    "what's a good recipe for banana bread",
]
IN_SCOPE = {
    "my card got charged two times for the same invoice": "billing",
    "i forgot my password and the reset email never comes": "login",
    "the app freezes whenever I try to attach a photo": "bug_report",
}
TWO_TOPICS = "I was charged twice for my subscription and now I can't log in to my account at all"
ONE_TOPIC_CLAUSES = [
    "i forgot my password, and the reset email never comes, so I am locked out",
    "The app crashes when I open it, then it shows error 500 when I try again",
]


def _classifier(tmp_path: Path, categories: dict) -> Classifier:
    path = tmp_path / "categories.yaml"
    path.write_text(yaml.safe_dump(categories))
    return build_classifier(Settings(categories_file=path))


@pytest.fixture(scope="module")
def support_bot(tmp_path_factory: pytest.TempPathFactory) -> Classifier:
    return _classifier(tmp_path_factory.mktemp("support"), SUPPORT_BOT)


def test_chit_chat_is_out_of_scope_with_low_confidence_and_goes_to_the_fallback_model(support_bot: Classifier) -> None:
    for result in support_bot.classify(CHIT_CHAT):
        assert result.in_scope is False, result
        assert result.confidence < 0.5  # the Semantic Router falls back below its default threshold
        assert result.labels == ()
        assert result.category in support_bot.info.categories.names  # still names the nearest, for old clients
        assert result.model == "human-queue"  # the fallback category's model, whichever category is nearest


def test_a_query_in_a_language_the_model_does_not_read_goes_to_the_fallback_model(support_bot: Classifier) -> None:
    """builtin:minilm reads English: a Spanish billing question is said so, never guessed with confidence."""
    (result,) = support_bot.classify(["¿Por qué me cobraron dos veces la suscripción este mes?"])
    assert (result.language, result.language_served, result.in_scope) == ("es", False, False)
    assert result.confidence < 0.1 and result.labels == ()
    assert result.model == "human-queue"
    (english,) = support_bot.classify(["Why was I charged twice for my subscription this month?"])
    assert (english.language, english.language_served, english.in_scope, english.category) == ("en", True, True, "billing")


def test_own_traffic_stays_in_scope_with_its_category_model(support_bot: Classifier) -> None:
    results = support_bot.classify(list(IN_SCOPE))
    for result, expected in zip(results, IN_SCOPE.values()):
        assert result.in_scope is True, result
        assert result.category == expected and result.labels[0] == expected
    assert results[0].model == "billing-model"


def test_a_two_topic_query_gets_both_labels_main_first(support_bot: Classifier) -> None:
    (result,) = support_bot.classify([TWO_TOPICS])
    assert result.in_scope
    assert set(result.labels) == {"billing", "login"}
    assert result.labels[0] == result.category
    assert result.margin == pytest.approx(sorted(result.probabilities)[-1] - sorted(result.probabilities)[-2])


def test_a_one_topic_query_of_several_clauses_keeps_one_label(support_bot: Classifier) -> None:
    """Its parts all pick the same category, so no second label joins (classify/part_labels.py)."""
    results = support_bot.classify(ONE_TOPIC_CLAUSES)
    assert [r.labels for r in results] == [("login",), ("bug_report",)]


def test_second_labels_off_answers_the_main_category_alone(tmp_path: Path) -> None:
    path = tmp_path / "categories.yaml"
    path.write_text(yaml.safe_dump(SUPPORT_BOT))
    (result,) = build_classifier(Settings(categories_file=path, second_labels="off")).classify([TWO_TOPICS])
    assert result.in_scope and result.labels == (result.category,)


def test_answers_name_the_model_and_the_versions_that_decided(support_bot: Classifier) -> None:
    (result,) = support_bot.classify(["reset my password"])
    info = support_bot.info
    assert (result.revision.model_id, result.revision.category_set_version, result.revision.policy_version) == (
        info.model_id,
        info.category_set_version,
        info.policy_version,
    )


def test_the_fit_reports_thresholds_coverage_and_recall(support_bot: Classifier) -> None:
    scope = support_bot.info.scope
    assert scope is not None
    public = scope.to_public(support_bot.info.categories.names)
    assert set(public["categories"]) == {c["name"] for c in SUPPORT_BOT["categories"]}
    assert all(0.0 < c["threshold"] < 1.0 and not c["from_file"] for c in public["categories"].values())
    assert 0.8 <= public["expected_coverage"] <= 1.0 and 0.8 <= public["expected_out_of_scope_recall"] <= 1.0
    assert public["negatives"] > 50  # the packaged background set, less what looks like this bot's own
    # a support bot is no broad file: its answers keep the fitted in-scope probability, which holds near misses down
    assert public["broad_file"] is False and public["background_in_scope"] < 0.15


def test_a_threshold_in_the_file_wins_over_the_fitted_one(tmp_path: Path) -> None:
    lenient = {**SUPPORT_BOT, "categories": [{**c, "threshold": -1.0} for c in SUPPORT_BOT["categories"]]}
    classifier = _classifier(tmp_path, lenient)
    scope = classifier.info.scope
    assert scope is not None and scope.thresholds == (-1.0,) * 4 and all(scope.overridden)
    assert all(r.in_scope for r in classifier.classify(CHIT_CHAT))  # nothing falls under a similarity of -1


def test_a_file_may_turn_detection_off(tmp_path: Path) -> None:
    classifier = _classifier(tmp_path, {**SUPPORT_BOT, "detect_out_of_scope": False})
    assert classifier.info.scope is None
    results = classifier.classify(CHIT_CHAT)
    assert all(r.in_scope for r in results)
    assert all(r.confidence == pytest.approx(max(r.probabilities)) for r in results)


# ---- a file of small categories: 4 of 3 examples each (datasets/out-of-scope/small-bank-dev) ---------------------
SMALL_BANK = Path(__file__).resolve().parents[2] / "datasets" / "out-of-scope" / "small-bank-dev"


@pytest.fixture(scope="module")
def small_bank() -> Classifier:
    return build_classifier(Settings(categories_file=SMALL_BANK / "categories.yaml"))


def test_a_small_category_does_not_take_a_coding_request(small_bank: Classifier) -> None:
    """Fitted from 3 examples alone, transfers' threshold let this in at 0.5; borrowed from the off-topic set, it is out."""
    (result,) = small_bank.classify(["write a python function to sort a list"])
    assert result.in_scope is False and result.confidence < 0.5 and result.labels == ()


def test_a_file_of_small_categories_meets_the_out_of_scope_targets_on_its_queries(small_bank: Classifier) -> None:
    """Its 24 in-scope and 30 off-topic queries (coding, cooking, sports, trivia, near misses), written before measuring:
    at least 70% of the off-topic ones answered out of scope, with in-scope accuracy 0.85 or more."""
    queries = load_dataset(SMALL_BANK / "queries.jsonl")
    answers = small_bank.classify([q.text for q in queries])
    predictions = [Prediction(a.category if a.in_scope else OUT_OF_SCOPE, a.confidence) for a in answers]
    figures = scope_metrics([q.category for q in queries], predictions)
    assert (figures["in_scope_n"], figures["out_of_scope_n"]) == (24, 30)
    assert figures["out_of_scope_recall"] >= 0.7 and figures["in_scope_accuracy"] >= 0.85, figures
    scope = small_bank.info.scope
    assert scope is not None and min(scope.coverage) >= 0.9  # its own examples stay in scope
    assert not scope.broad  # its off-topic queries keep the fitted in-scope probability


# ---- a broad file: 14 subject areas of 8 examples (datasets/out-of-scope/broad-subjects-dev) ------------------------
BROAD = Path(__file__).resolve().parents[2] / "datasets" / "out-of-scope" / "broad-subjects-dev"


def test_a_broad_file_keeps_its_own_examples_and_most_of_its_own_queries_in_scope() -> None:
    """A study Q&A file (biology ... engineering) lives where the off-topic set's general knowledge does: the fit drops
    those texts as its own, so its examples, each left out, all stay in scope, and at least 9 in 10 of its 280
    in-domain queries (two-word questions to exam questions) are answered in scope (0.939 measured, decision 0043)."""
    classifier = build_classifier(Settings(categories_file=BROAD / "categories.yaml"))
    scope = classifier.info.scope
    assert scope is not None and min(scope.coverage) >= 0.95
    queries = load_dataset(BROAD / "queries.jsonl")
    answers = classifier.classify([q.text for q in queries])
    assert len(answers) == 280
    assert sum(a.in_scope for a in answers) / len(answers) >= 0.9
    # It takes a good share of the off-topic set in scope itself (0.24 measured): a broad file, whose in-scope answers
    # are read against its examples' typical in-scope probability, so most of its traffic clears a router's 0.5
    # (0.83 measured, against 0.74 as fitted and 0.90 with detection off; decision 0046).
    assert scope.broad and scope.background_in_scope >= 0.15
    assert sum(a.confidence >= 0.5 for a in answers) / len(answers) >= 0.78
    # and which queries are out of scope is as fitted: of its 60 off-topic queries (chit-chat, other topics, near
    # misses, injections) most are still answered out of scope and few clear 0.5 (0.82 and 0.13 measured)
    off_topic = load_dataset(BROAD / "off-topic.jsonl")
    strays = classifier.classify([q.text for q in off_topic])
    assert len(strays) == 60 and all(q.category == OUT_OF_SCOPE for q in off_topic)
    assert sum(not a.in_scope for a in strays) / 60 >= 0.7
    assert sum(a.confidence >= 0.5 for a in strays) / 60 <= 0.25
