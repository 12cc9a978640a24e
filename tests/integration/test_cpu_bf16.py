"""--dtype bfloat16 on a CPU (what the encoder suggests on AMX hosts) answers like the fp32 default.

Real MiniLM, both dtypes, on the project's own labelled router queries (datasets/accuracy/router-traffic)
against the packaged default categories. bf16 works on any CPU (slowly without AMX); the suggestion
promises the same categories, so that is what is asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from mcp_classifier.settings import Settings
from mcp_classifier.wiring import build_classifier

QUERIES = Path(__file__).resolve().parents[2] / "datasets" / "accuracy" / "router-traffic" / "queries.jsonl"


def test_bf16_on_cpu_gives_the_fp32_categories_and_accuracy() -> None:
    rows = [json.loads(line) for line in QUERIES.read_text().splitlines() if line.strip()]
    texts, labels = [r["text"] for r in rows], [r["category"] for r in rows]
    fp32 = build_classifier(Settings(device="cpu", dtype="float32"))
    bf16 = build_classifier(Settings(device="cpu", dtype="bfloat16"))
    assert bf16.encoder.dtype is torch.bfloat16 and fp32.encoder.dtype is torch.float32
    full, half = fp32.classify(texts), bf16.classify(texts)
    same = sum(a.category == b.category for a, b in zip(full, half))
    assert same >= 0.99 * len(texts), f"bf16 changed {len(texts) - same} of {len(texts)} categories"
    accuracy = [np.mean([r.category == label for r, label in zip(results, labels)]) for results in (full, half)]
    assert abs(accuracy[0] - accuracy[1]) <= 0.01
    # Confidences move a little (median ~1e-4, 90th percentile ~0.004, the odd borderline query ~0.1 when measured),
    # and the routing decision built on them stays the same.
    moved = np.array([abs(a.confidence - b.confidence) for a, b in zip(full, half)])
    assert np.median(moved) < 0.005 and np.percentile(moved, 90) < 0.02
    same_route = sum(a.model == b.model and a.use_reasoning == b.use_reasoning for a, b in zip(full, half))
    assert same_route >= 0.99 * len(texts)
