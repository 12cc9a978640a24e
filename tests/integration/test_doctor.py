"""`doctor` on a small categories file with one pair made confusable on purpose: it must name that pair."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from mcp_classifier.classify.categories import CategoryConfig, load_categories
from mcp_classifier.classify.index import category_texts
from mcp_classifier.cli import main
from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.evaluation.doctor import TokenVectors, diagnose, render
from mcp_classifier.evaluation.near_misses import BACKGROUND, BUILT

CATEGORIES = {
    "categories": [
        {"name": "astronomy", "description": "Stars, planets, galaxies and space exploration.", "examples": [
            "how far away is the andromeda galaxy", "why does mars look red", "what is a neutron star",
            "when is the next solar eclipse", "how do astronomers find exoplanets", "what are saturn's rings made of"]},
        {"name": "cooking", "description": "Recipes, ingredients and kitchen techniques.", "examples": [
            "how long do I boil an egg for a soft yolk", "substitute for buttermilk in pancakes", "how to make a roux",
            "best way to cook rice without a rice cooker", "why did my bread not rise", "how do I caramelise onions"]},
        # The pair made confusable on purpose: both are about card charges and payments.
        {"name": "billing", "description": "Charges, invoices and payment cards.", "examples": [
            "why was my card charged twice", "I was billed the wrong amount this month", "update the card I pay with",
            "my payment went through but the order failed", "where do I download my invoice", "refund the double charge on my card"]},
        {"name": "payments", "description": "Paying, payment methods and card charges.", "examples": [
            "my card payment was declined", "can I pay with paypal", "the charge on my card looks wrong",
            "change the card used for payments", "I paid but did not get a receipt", "why was my card charged again"]},
        {"name": "gardening", "description": "Plants, soil, watering and garden care.", "examples": [
            "when should I prune roses", "why are my tomato leaves turning yellow", "how often to water succulents",
            "best soil for raised beds", "how to get rid of aphids naturally", "can I grow lavender in pots"]},
    ]
}  # fmt: skip


@pytest.fixture(scope="module")
def categories_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("doctor") / "categories.yaml"
    path.write_text(yaml.safe_dump(CATEGORIES, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def encoder() -> TextEncoder:
    return TextEncoder.load("builtin:minilm", device="cpu")


@pytest.fixture(scope="module")
def vectors(categories_file: Path, encoder: TextEncoder) -> tuple[CategoryConfig, np.ndarray, np.ndarray]:
    config = load_categories(categories_file)
    examples = encoder.encode_documents([e for c in config.categories for e in c.examples])
    descriptions = encoder.encode_documents([c.description for c in config.categories])
    return config, examples, descriptions


@pytest.fixture(scope="module")
def token_vectors(vectors: tuple[CategoryConfig, np.ndarray, np.ndarray], encoder: TextEncoder) -> TokenVectors:
    config = vectors[0]
    return TokenVectors(
        encoder.encode_with_tokens([e for c in config.categories for e in c.examples], query=False)[1],
        encoder.encode_with_tokens(category_texts(config), query=False)[1],
    )


@pytest.mark.parametrize("token_matching", ["off", "auto"])
@pytest.mark.parametrize("method", ["neighbours", "linear"])
def test_doctor_names_the_confusable_pair_first(
    vectors: tuple[CategoryConfig, np.ndarray, np.ndarray], token_vectors: TokenVectors, method: str, token_matching: str
) -> None:
    config, examples, descriptions = vectors
    diagnosis = diagnose(config, examples, descriptions, method, tokens=token_vectors if token_matching == "auto" else None)
    top = diagnosis.pairs[0]
    assert {top.first, top.second} == {"billing", "payments"}, diagnosis.pairs[:3]
    assert top in diagnosis.flagged_pairs
    assert top.centroid_similarity > max(p.centroid_similarity for p in diagnosis.pairs[1:])
    # most stray votes, and the most confident ones, are between the pair; its two categories are the weakest
    between_pair = [m for m in diagnosis.misvotes if {m.category, m.predicted} == {"billing", "payments"}]
    assert len(between_pair) >= 4 and len(between_pair) > len(diagnosis.misvotes) / 2, diagnosis.misvotes
    assert all(m in between_pair for m in diagnosis.misvotes[:3]), diagnosis.misvotes  # listed most confident first
    assert {h.name for h in diagnosis.health[:2]} == {"billing", "payments"}
    assert diagnosis.health[0].taken_by in ("billing", "payments")
    assert all(h.recall >= 0.8 for h in diagnosis.health if h.name in ("astronomy", "cooking", "gardening"))
    assert 0.6 <= diagnosis.expected_accuracy < 1.0 and 0.0 <= diagnosis.expected_ece <= 1.0
    assert 0.0 < diagnosis.expected_ece_if_calibrated < 0.3  # a few dozen examples: sampling noise alone shows
    text = render(diagnosis)
    assert f"a perfectly calibrated model would show about {diagnosis.expected_ece_if_calibrated:.3f}" in text
    assert "billing / payments" in text.replace("payments / billing", "billing / payments") and "confusable" in text


def test_doctor_cli_prints_the_table_and_writes_a_report(categories_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command a user runs, called in process: its exit codes and output are the console script's."""
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "\n".join(json.dumps(q) for q in [
            {"text": "is pluto still a planet", "category": "astronomy"},
            {"text": "how do I fix a runny custard", "category": "cooking"},
            {"text": "my card got charged two times", "category": "billing"},
        ]) + "\n"
    )  # fmt: skip
    code = main(["doctor", "--categories-file", str(categories_file), "--queries", str(queries), "--out", str(tmp_path / "report")])
    done = capsys.readouterr()
    assert code == 0, done.err[-2000:]
    assert "## Confusable categories" in done.out and "On your 3 labelled queries" in done.out
    assert "if perfectly calibrated" in done.out
    assert (tmp_path / "report" / "doctor.md").read_text().startswith("# Categories doctor")
    report = json.loads((tmp_path / "report" / "doctor.json").read_text())
    assert {report["pairs"][0]["first"], report["pairs"][0]["second"]} == {"billing", "payments"}
    assert (tmp_path / "report" / "similarity.png").stat().st_size > 5000
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "hello", "category": "no_such_category"}) + "\n")
    code = main(["doctor", "--categories-file", str(categories_file), "--queries", str(bad)])
    assert code == 1 and "no_such_category" in capsys.readouterr().err


SMALL_BANK = Path(__file__).resolve().parents[2] / "datasets" / "out-of-scope" / "small-bank-dev"


def test_doctor_scores_null_labels_as_eval_does_and_names_the_small_categories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bank file of 4 categories of 3 examples, and its 54 labelled queries of which 30 are labelled null: doctor
    counts the null ones as out-of-scope queries (eval's figures, to the digit), and says which categories are too
    small and how many examples each needs."""
    categories, queries = SMALL_BANK / "categories.yaml", SMALL_BANK / "queries.jsonl"
    code = main(["doctor", "--categories-file", str(categories), "--queries", str(queries), "--out", str(tmp_path / "doctor")])
    done = capsys.readouterr()
    assert code == 0, done.err[-2000:]
    assert "On your 24 labelled queries (30 more are labelled null, out of scope: below)" in done.out
    assert "of the 30 labelled null answered out of scope" in done.out
    assert "## Categories with too few examples" in done.out
    report = json.loads((tmp_path / "doctor" / "doctor.json").read_text())
    assert report["queries"]["n"] == 24 and all(e["expected"] != "(out of scope)" for e in report["queries"]["errors"])
    assert report["small"] == [{"name": n, "examples": 3, "add": 2} for n in ("balance", "transfers", "cards", "loans")]
    for name in ("balance", "transfers", "cards", "loans"):
        assert f"| {name} | 3 | 2 |" in done.out
    # what the in-scope check costs a query like the file's own: the figure /health shows, and the threshold it implies
    typical = report["scope"]["typical_in_scope_probability"]
    assert 0.5 < typical < 1.0 and f"their typical in-scope probability {typical:.2f}." in done.out
    assert f"a category probability under {0.5 / typical:.2f} falls back" in done.out
    assert main(["eval", "--data", str(queries), "--categories-file", str(categories), "--out", str(tmp_path / "eval")]) == 0
    capsys.readouterr()
    (evaluation,) = json.loads((tmp_path / "eval" / "report.json").read_text())
    figures = {k: v for k, v in report["query_scope"].items() if k != "wrong_side"}
    assert figures == pytest.approx(evaluation["scope"])
    assert (figures["in_scope_n"], figures["out_of_scope_n"]) == (24, 30)
    missed = {e["text"] for e in report["query_scope"]["wrong_side"] if e["expected"] == "(out of scope)"}
    assert len(missed) == round(30 * (1 - figures["out_of_scope_recall"]))


def test_doctor_proposes_near_misses_built_from_the_bank_files_own_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bank file's first draft: doctor lists, per category, off-topic texts near it with the in-scope probability the
    classifier gives each, among them near misses built from the category's own words ("... loan ..." for loans)
    that the classifier takes in scope: the kind a user copies into out_of_scope_examples."""
    code = main(["doctor", "--categories-file", str(SMALL_BANK / "categories.yaml"), "--out", str(tmp_path / "doctor")])
    done = capsys.readouterr()
    assert code == 0, done.err[-2000:]
    assert "## Candidate out-of-scope examples" in done.out
    candidates = json.loads((tmp_path / "doctor" / "doctor.json").read_text())["candidates"]
    built = [c for c in candidates if c["source"] == BUILT]
    assert {c["category"] for c in built} == {"balance", "transfers", "cards", "loans"}
    assert {c["source"] for c in candidates} == {BUILT, BACKGROUND}
    assert any("loan" in c["text"] and c["category"] == "loans" for c in built)
    assert any(c["in_scope_probability"] >= 0.5 for c in built)  # near misses the fit alone lets through
    assert all(0.0 <= c["in_scope_probability"] <= 1.0 for c in candidates)
    for c in candidates:
        assert f"| {c['category']} | {c['text']} | {c['source']} |" in done.out
