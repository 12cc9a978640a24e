"""The query's language, and whether the model reads it: the real detector (fastText's compact model), no embedding model.

A false alarm on an English query would turn a right answer into a fallback, so English must almost never be
said unserved, even when short, misspelt or full of code and foreign names (datasets/languages); a query in
another language should mostly be caught, and one in another script always.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_classifier.classify.build import language_gate
from mcp_classifier.classify.language import UNDETERMINED, LanguageGate
from mcp_classifier.engine.model_card import declared_languages
from mcp_classifier.settings import Settings

DATASETS = Path(__file__).resolve().parents[2] / "datasets"


@pytest.fixture(scope="module")
def english_only() -> LanguageGate:
    return LanguageGate(["en"], min_confidence=0.9)


def _language_set() -> list[dict[str, str]]:
    return [json.loads(line) for line in (DATASETS / "languages" / "queries.jsonl").read_text().splitlines() if line.strip()]


def _english_traffic() -> list[str]:
    """Every English query of the accuracy sets: realistic router traffic."""
    return [
        json.loads(line)["text"]
        for path in sorted((DATASETS / "accuracy").glob("*/queries.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def test_english_router_traffic_is_never_said_unserved(english_only: LanguageGate) -> None:
    texts = _english_traffic()
    flagged = [t for t in texts if not english_only.check(t).served]
    assert len(texts) > 1000 and flagged == []


def test_hard_english_is_almost_never_said_unserved(english_only: LanguageGate) -> None:
    hard = [row["text"] for row in _language_set() if row["language"] == "en"]
    flagged = [t for t in hard if not english_only.check(t).served]
    assert len(flagged) <= len(hard) // 100, flagged  # at most 1% of short, misspelt, code-laden English


def test_most_queries_in_other_languages_are_caught_and_named(english_only: LanguageGate) -> None:
    foreign = [row for row in _language_set() if row["language"] != "en"]
    verdicts = [english_only.check(row["text"]) for row in foreign]
    caught = sum(not v.served for v in verdicts)
    named = sum(v.language == row["language"] for v, row in zip(verdicts, foreign))
    misnamed = [(row["text"], v.language) for v, row in zip(verdicts, foreign) if v.language not in (row["language"], UNDETERMINED)]
    assert caught >= 0.75 * len(foreign), caught
    assert named >= 0.7 * len(foreign), named  # 180 of 240; the rest und, where the detector is under 0.9
    assert misnamed == []
    assert all(v.unserved_probability >= 0.9 for v in verdicts if not v.served)


def test_a_language_is_named_only_at_the_detectors_confidence(english_only: LanguageGate) -> None:
    """Below min_confidence the detector's guess is not reported: "Solve dy/dx = 3x^2" reads as Italian at 0.82."""
    language, probability, _ = english_only.top_languages("Solve dy/dx = 3x^2")
    assert language != "en" and probability < english_only.min_confidence  # what the detector guesses
    verdict = english_only.check("Solve dy/dx = 3x^2")
    assert (verdict.language, verdict.served, verdict.unserved_probability) == (UNDETERMINED, True, 0.0)
    assert LanguageGate([], min_confidence=0.9).check("Solve dy/dx = 3x^2").language == UNDETERMINED  # every language served
    assert LanguageGate(["en"], min_confidence=0.8).check("Solve dy/dx = 3x^2").language == language  # a lower bar names it
    assert english_only.check("What is the derivative of x squared with respect to x?").language == "en"


def test_english_traffic_is_never_named_another_language(english_only: LanguageGate) -> None:
    """On every English query of the accuracy sets and the hard English ones, the language is en or und, never wrong."""
    texts = _english_traffic() + [row["text"] for row in _language_set() if row["language"] == "en"]
    languages = [english_only.check(t).language for t in texts]
    assert [(t, lang) for t, lang in zip(texts, languages) if lang not in ("en", UNDETERMINED)] == []
    assert languages.count("en") >= len(texts) // 2  # plain English is named (1,060 of 1,783)


def test_a_short_query_in_another_script_is_always_unserved(english_only: LanguageGate) -> None:
    for text in ("取消订单", "нужна помощь", "パスワード"):
        verdict = english_only.check(text)
        assert not verdict.served and verdict.unserved_probability == 1.0, text


def test_a_spanish_query_is_served_where_spanish_is(english_only: LanguageGate) -> None:
    text = "¿Cómo puedo cambiar la tarjeta de crédito de mi suscripción?"
    assert english_only.check(text).language == "es" and not english_only.check(text).served
    assert LanguageGate(["en", "es"], min_confidence=0.9).check(text).served


def test_with_no_served_list_the_language_is_reported_but_every_query_served() -> None:
    gate = LanguageGate([], min_confidence=0.9)
    verdict = gate.check("Wie viele Einwohner hat Hamburg ungefähr?")
    assert verdict.language == "de" and verdict.served and verdict.unserved_probability == 0.0
    assert gate.check("?!").language == UNDETERMINED


def test_served_languages_come_from_the_setting_or_the_model_card() -> None:
    assert language_gate(Settings().categories, ("en",)).served == {"en"}
    assert language_gate(Settings(served_languages="any").categories, ("en",)).served == frozenset()
    assert language_gate(Settings(served_languages="en,DE").categories, ("en",)).served == {"en", "de"}
    assert language_gate(Settings().categories, ()).served == frozenset()  # nothing declared: every language


def test_a_served_languages_setting_that_is_not_a_code_list_is_refused() -> None:
    with pytest.raises(ValueError):
        Settings(served_languages="english")


@pytest.mark.parametrize(
    ("front_matter", "expected"),
    [
        ("language: en\n", ("en",)),
        ("language:\n- en\n- de\n- zh-CN\n", ("de", "en", "zh")),
        ("language:\n- multilingual\n- en\n", ()),
        ("license: apache-2.0\n", ()),
    ],
)
def test_the_model_card_declares_the_languages(tmp_path: Path, front_matter: str, expected: tuple[str, ...]) -> None:
    (tmp_path / "README.md").write_text(f"---\n{front_matter}---\n# A model\n")
    assert declared_languages(tmp_path) == expected


def test_a_card_without_front_matter_declares_nothing(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# A model\nlanguage: en\n")
    assert declared_languages(tmp_path) == ()
    assert declared_languages(tmp_path / "absent") == ()
