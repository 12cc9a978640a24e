"""Markdown report with PNG figures (confusion heatmaps, one reliability diagram for all systems)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .metrics import Evaluation, Prediction, coverage_accuracy_curve

MAX_ERRORS_LISTED = 25
ECE_NOTE = (
    'ECE uses ten equal-width confidence bins. "ECE if calibrated" is what a perfectly calibrated model '
    "would show with the same confidences on this many items; an ECE near it is sampling noise, not miscalibration."
)


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def summary_table(evaluations: list[Evaluation]) -> str:
    threshold = next((e.threshold for e in evaluations if e.threshold is not None), None)
    at = f" (confidence ≥ {threshold:g})" if threshold is not None else ""
    lines = [
        f"| system | n | accuracy | macro-F1 | ECE | ECE if calibrated | use_reasoning right | answered{at} | accuracy when answered |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in evaluations:
        lines.append(
            f"| {e.system} | {e.n} | {e.accuracy:.1%} | {e.macro_f1:.3f} | {e.ece:.3f} | {e.ece_if_calibrated:.3f} | {_percent(e.reasoning_accuracy)} "
            f"| {_percent(e.answered_share)} | {_percent(e.answered_accuracy)} |"
        )
    scoped = [e for e in evaluations if e.scope]
    if scoped:
        lines += [
            "",
            "| system | in scope n | out of scope n | in-scope accuracy | coverage | out-of-scope recall | out-of-scope precision "
            "| AUROC of confidence | ECE (all) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for e in scoped:
            f = e.scope or {}
            lines.append(
                f"| {e.system} | {f['in_scope_n']:g} | {f['out_of_scope_n']:g} | {f['in_scope_accuracy']:.1%} | {f['coverage']:.1%} "
                f"| {f['out_of_scope_recall']:.1%} | {f['out_of_scope_precision']:.1%} | {f['auroc']:.3f} | {e.ece:.3f} |"
            )
    labelled = [e for e in evaluations if e.second_labels]
    if labelled:
        lines += [
            "",
            "| system | two-topic n | labels name both topics | one-topic n | a second label added |",
            "|---|---:|---:|---:|---:|",
        ]
        for e in labelled:
            s = e.second_labels or {}
            lines.append(f"| {e.system} | {s['two_topic_n']:g} | {s['both']:.1%} | {s['one_topic_n']:g} | {s['false_second']:.1%} |")
    tags = sorted({t for e in evaluations for t in e.per_tag})
    if tags:
        lines += ["", "| system | " + " | ".join(f"{t} (n={evaluations[0].per_tag.get(t, {}).get('n', 0):g})" for t in tags) + " |"]
        lines.append("|---|" + "---:|" * len(tags))
        for e in evaluations:
            lines.append(
                f"| {e.system} | " + " | ".join(_percent(e.per_tag[t]["accuracy"]) if t in e.per_tag else "—" for t in tags) + " |"
            )
    return "\n".join(lines)


def _per_category(e: Evaluation) -> str:
    lines = ["| category | precision | recall | F1 |", "|---|---:|---:|---:|"]
    lines += [f"| {c} | {e.precision[c]:.3f} | {e.recall[c]:.3f} | {e.f1[c]:.3f} |" for c in e.labels]
    return "\n".join(lines)


def _confusion(e: Evaluation) -> str:
    lines = ["| true \\ predicted | " + " | ".join(e.labels) + " |", "|---|" + "---:|" * len(e.labels)]
    lines += [f"| {label} | " + " | ".join(str(v) for v in row) + " |" for label, row in zip(e.labels, e.confusion)]
    return "\n".join(lines)


def _histogram(e: Evaluation) -> str:
    lines = ["| confidence | count | accuracy |", "|---|---:|---:|"]
    for b in e.reliability:
        accuracy = f"{b['accuracy']:.1%}" if b["count"] else "—"
        lines.append(f"| {b['lo']:.1f}–{b['hi']:.1f} | {int(b['count'])} | {accuracy} |")
    return "\n".join(lines)


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in name).strip("-").lower() or "system"


def write_figures(evaluations: list[Evaluation], out_dir: Path) -> dict[str, str]:
    """PNG files by role; empty when matplotlib is not installed (the Markdown still has every number)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    files: dict[str, str] = {}
    for e in evaluations:
        fig, ax = plt.subplots(figsize=(5.5, 4.5))
        image = ax.imshow(e.confusion, cmap="Blues")
        ax.set_xticks(range(len(e.labels)), e.labels, rotation=45, ha="right")
        ax.set_yticks(range(len(e.labels)), e.labels)
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        ax.set_title(f"Confusion matrix: {e.system}")
        dark = max(map(max, e.confusion)) / 2  # cells above half the largest get white text
        for i, row in enumerate(e.confusion):
            for j, value in enumerate(row):
                ax.text(j, i, str(value), ha="center", va="center", color="white" if value > dark else "black")
        fig.colorbar(image, ax=ax)
        fig.tight_layout()
        name = f"confusion-{_slug(e.system)}.png"
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)
        files[f"confusion {e.system}"] = name
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    for e in evaluations:
        used = [b for b in e.reliability if b["count"]]
        ax.plot([b["confidence"] for b in used], [b["accuracy"] for b in used], marker="o", label=f"{e.system} (ECE {e.ece:.3f})")
    _finish(fig, ax, out_dir / "reliability.png", ("mean confidence in bin", "accuracy in bin"), "Reliability diagram", "upper left")
    files["reliability"] = "reliability.png"
    if any(e.scope for e in evaluations):
        fig, ax = plt.subplots(figsize=(5.5, 4.5))
        for e in evaluations:
            truth = [str(p["expected"]) for p in e.predictions]
            answers = [Prediction(str(p["predicted"]), float(p["confidence"])) for p in e.predictions]
            curve = coverage_accuracy_curve(truth, answers)
            ax.plot([c for c, _ in curve], [a for _, a in curve], label=e.system)
        axes = (
            "coverage (share of all queries answered, most confident first)",
            "accuracy of the answered (out of scope answered = wrong)",
        )
        _finish(fig, ax, out_dir / "coverage-accuracy.png", axes, "Coverage and accuracy as the confidence threshold rises", "lower left")
        files["coverage-accuracy"] = "coverage-accuracy.png"
    return files


def _finish(fig: Any, ax: Any, path: Path, labels: tuple[str, str], title: str, legend: str) -> None:
    """Unit axes with a little headroom (points on the border stay whole), labels, legend, and the PNG."""
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.04)
    ax.set_title(title)
    ax.legend(loc=legend, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(fig)


def write_report(evaluations: list[Evaluation], out_dir: Path, data_name: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = write_figures(evaluations, out_dir)
    parts = [f"# Classification report: {data_name}", "", summary_table(evaluations), "", ECE_NOTE, ""]
    if "reliability" in figures:
        parts += ["![reliability diagram](reliability.png)", ""]
    if "coverage-accuracy" in figures:
        parts += ["![coverage and accuracy](coverage-accuracy.png)", ""]
    else:
        parts += ["(PNG figures need matplotlib: pip install 'mcp-classifier[eval]')", ""]
    for e in evaluations:
        parts += [f"## {e.system}", "", _per_category(e), "", "### Confusion matrix", "", _confusion(e), ""]
        if f"confusion {e.system}" in figures:
            parts += [f"![confusion matrix]({figures[f'confusion {e.system}']})", ""]
        parts += ["### Confidence histogram", "", _histogram(e), ""]
        if e.errors:
            parts += [f"### Misclassified ({len(e.errors)})", "", "| text | expected | predicted | confidence |", "|---|---|---|---:|"]
            parts += [
                f"| {str(x['text']).replace('|', '/')} | {x['expected']} | {x['predicted']} | {float(x['confidence']):.2f} |"
                for x in e.errors[:MAX_ERRORS_LISTED]
            ]
            parts.append("")
    report = out_dir / "report.md"
    report.write_text("\n".join(parts), encoding="utf-8")
    (out_dir / "report.json").write_text(json.dumps([asdict(e) for e in evaluations], indent=2), encoding="utf-8")
    return report
