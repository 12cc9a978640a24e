"""`mcp-classifier eval`: metrics checked against values computed here, the peer's labelled data, side-by-side URLs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier
from tests.support.processes import ServerProcess

ROWS = [
    ("what is 15 percent of 80", "math", False),
    ("solve 3x - 7 = 11 for x", "math", False),
    ("how does photosynthesis make sugar", "science", None),
    ("why do magnets attract iron", "science", None),
    ("how do I write a for loop in javascript", "technology", None),
    ("what is a docker volume", "technology", None),
    ("who was the first president of the united states", "history", None),
    ("when did the roman republic end", "history", None),
    ("good morning, how are you", "general", None),
    ("what should I cook for dinner tonight", "general", None),
    # deliberately labelled against the grain, so the report has errors to count
    ("what is the derivative of x cubed", "history", None),
    ("tell me about the french revolution", "science", None),
]


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcp_classifier.cli", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("eval") / "labelled.jsonl"
    lines = []
    for text, category, reasoning in ROWS:
        row: dict[str, object] = {"text": text, "category": category}
        if reasoning is not None:
            row["expected_use_reasoning"] = reasoning
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    return path


def _independent_metrics(predictions: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy, confusion and ECE recomputed here, by plain loops, from the report's own predictions."""
    truth = [category for _, category, _ in ROWS]
    correct = [t == p["predicted"] for t, p in zip(truth, predictions)]
    confusion: dict[tuple[str, str], int] = {}
    for t, p in zip(truth, predictions):
        confusion[(t, p["predicted"])] = confusion.get((t, p["predicted"]), 0) + 1
    ece = 0.0
    for b in range(10):
        lo, hi = b / 10, (b + 1) / 10
        members = [
            (c, p["confidence"]) for c, p in zip(correct, predictions) if (lo < p["confidence"] <= hi) or (b == 0 and p["confidence"] == 0)
        ]
        if members:
            accuracy = sum(c for c, _ in members) / len(members)
            confidence = sum(conf for _, conf in members) / len(members)
            ece += len(members) / len(ROWS) * abs(accuracy - confidence)
    return {"accuracy": sum(correct) / len(ROWS), "confusion": confusion, "ece": ece}


def test_eval_reports_accuracy_confusion_and_ece_as_computed_independently(data_file: Path, tmp_path: Path) -> None:
    done = _cli("eval", "--data", str(data_file), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    (report,) = json.loads((tmp_path / "report" / "report.json").read_text())
    predictions = report["predictions"]
    assert [p["text"] for p in predictions] == [text for text, _, _ in ROWS]
    # The same predictions, so the figures must agree exactly (up to summation order: 1e-12).
    expected = _independent_metrics(predictions)
    assert report["accuracy"] == pytest.approx(expected["accuracy"], abs=1e-12)
    assert report["accuracy"] <= 10 / 12  # the two mislabelled rows cannot be right
    assert report["ece"] == pytest.approx(expected["ece"], abs=1e-12)
    for i, true_label in enumerate(report["labels"]):
        for j, predicted in enumerate(report["labels"]):
            assert report["confusion"][i][j] == expected["confusion"].get((true_label, predicted), 0)
    assert sum(report["confidence_histogram"]) == len(ROWS)
    # The report's predictions are the model's: a second, in-process run agrees up to float32 noise
    # (two runs of the same fp32 forward differ in the last bits: 1e-6 seen, 1e-4 allowed).
    rerun = build_classifier(Settings()).classify([text for text, _, _ in ROWS])
    assert [p["predicted"] for p in predictions] == [r.category for r in rerun]
    assert [tuple(p["labels"]) for p in predictions] == [r.labels for r in rerun]
    assert [p["confidence"] for p in predictions] == pytest.approx([r.confidence for r in rerun], abs=1e-4)
    stated = [(r, p["use_reasoning"]) for (_, _, r), p in zip(ROWS, predictions) if r is not None]
    assert report["reasoning_accuracy"] == pytest.approx(sum(r == got for r, got in stated) / len(stated))
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "| system | n | accuracy |" in markdown and "Confusion matrix" in markdown
    assert (tmp_path / "report" / "reliability.png").stat().st_size > 1000
    assert "accuracy" in done.stdout  # the summary table is printed too


def test_eval_puts_a_running_server_beside_the_local_model(data_file: Path, tmp_path: Path, server: ServerProcess) -> None:
    done = _cli("eval", "--data", str(data_file), "--url", server.url, "--local", "--out", str(tmp_path / "r"))
    assert done.returncode == 0, done.stderr
    local, remote = json.loads((tmp_path / "r" / "report.json").read_text())
    assert remote["system"] == server.url and local["system"].startswith("local")
    # Same model and categories behind both: the same answers, up to float32 noise between two runs.
    assert [p["predicted"] for p in remote["predictions"]] == [p["predicted"] for p in local["predictions"]]
    assert [p["labels"] for p in remote["predictions"]] == [p["labels"] for p in local["predictions"]]  # the server's labels read
    assert [p["confidence"] for p in remote["predictions"]] == pytest.approx([p["confidence"] for p in local["predictions"]], abs=1e-4)
    assert remote["confusion"] == local["confusion"]


@pytest.mark.parametrize("content, message", [("not json\n", "not valid JSON"), ('{"text": "hi"}\n', "no category")])
def test_bad_data_file_exits_with_a_clear_message(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    done = _cli("eval", "--data", str(path), "--out", str(tmp_path / "r"))
    assert done.returncode == 1 and message in done.stderr


def test_unreachable_url_exits_with_a_clear_message(data_file: Path, tmp_path: Path) -> None:
    from mcp_classifier.embedder.local_cluster import free_port

    done = _cli("eval", "--data", str(data_file), "--url", f"http://127.0.0.1:{free_port()}", "--out", str(tmp_path / "r"))
    assert done.returncode == 1 and "eval:" in done.stderr


def test_peer_labelled_examples_reach_95_percent_with_ece_under_0_08(peer_dir: Path, tmp_path: Path) -> None:
    """The peer's 95 examples are evaluation data only: never copied into the categories file."""
    done = _cli("eval", "--data", str(peer_dir / "training_data.csv"), "--out", str(tmp_path / "peer"))
    assert done.returncode == 0, done.stderr
    (report,) = json.loads((tmp_path / "peer" / "report.json").read_text())
    assert report["n"] == 95
    assert report["accuracy"] >= 0.95, report["errors"]
    assert report["ece"] <= 0.08
