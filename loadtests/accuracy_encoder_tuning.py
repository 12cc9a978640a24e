#!/usr/bin/env python
"""Would tuning the encoder on a user's few examples beat a head on frozen vectors? (docs/accuracy, "not kept")

Two ways of learning from a few-shot categories file, each against a logistic head on the frozen
vectors, on the held-out queries of the project's few-shot sets (docs/accuracy/sets):
  * setfit: the encoder's own weights tuned on contrastive pairs of the examples (same category -> 1,
    other -> 0, cosine loss), then the logistic head on the tuned vectors. This is SetFit's recipe,
    written out here because the `setfit` package pulls in sentence-transformers and datasets;
  * shipped: the service's own scorer (auto, word matches on) on the frozen and on the tuned vectors;
  * adapter: the encoder left frozen (so it stays shared with the tool filter and the caches), and a
    residual map trained on the vectors with the same target.
Prints accuracy per set, the mean, and the tuning time. This takes about 5 minutes on 2 cores.

Usage (from the repository root):
    python -m loadtests.accuracy_encoder_tuning [--pairs 5] [--sets docs/accuracy/sets]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import yaml
from sklearn.linear_model import LogisticRegression
from transformers import AutoModel, AutoTokenizer

from mcp_classifier.core.categories import load_categories
from mcp_classifier.core.encoder import resolve_model_path
from mcp_classifier.core.fusion import fit_category_scorer
from mcp_classifier.core.index import category_texts

# set -> the folder whose categories.yaml scores it (subjects-exam reuses the subjects file)
FEW_SHOT_SETS = {
    "support-desk": "support-desk",
    "subjects": "subjects",
    "devops-intents": "devops-intents",
    "travel-agent": "travel-agent",
    "home-finance": "home-finance",
    "subjects-exam": "subjects",
}
HEAD_STRENGTH = 10.0  # logistic C, the same for every arm so that only the vectors differ
TUNING_LR = 2e-5  # SetFit's published default for MiniLM-sized bodies
PAIR_BATCH = 16
ADAPTER_STEPS = 50
ADAPTER_LR = 1e-3


class Embedder:
    def __init__(self, model_name: str) -> None:
        path = resolve_model_path(model_name)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()

    def vectors(self, model: torch.nn.Module, texts: list[str], grad: bool = False) -> torch.Tensor:
        """Mean-pooled, normalised: what the service's encoder computes for MiniLM."""
        parts = []
        for start in range(0, len(texts), 32):
            batch = self.tokenizer(texts[start : start + 32], padding=True, truncation=True, max_length=128, return_tensors="pt")
            with torch.set_grad_enabled(grad):
                hidden = model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).float()
                parts.append(torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1))
        return torch.cat(parts)


def load(sets: Path, name: str) -> tuple[list[str], list[int], list[str], list[int]]:
    """Examples (with each description as one more) and held-out queries, labels as category indices."""
    config = yaml.safe_load((sets / FEW_SHOT_SETS[name] / "categories.yaml").read_text())
    names = [c["name"] for c in config["categories"]]
    texts, labels = [], []
    for index, category in enumerate(config["categories"]):
        for text in [*category["examples"], category.get("description") or category["name"]]:
            texts.append(text)
            labels.append(index)
    rows = [json.loads(line) for line in (sets / name / "queries.jsonl").read_text().splitlines() if line.strip()]
    return texts, labels, [r["text"] for r in rows], [names.index(r["category"]) for r in rows]


def head_accuracy(examples: torch.Tensor, labels: list[int], queries: torch.Tensor, truth: list[int]) -> float:
    head = LogisticRegression(C=HEAD_STRENGTH, max_iter=3000).fit(examples.numpy(), labels)
    return float((head.predict(queries.numpy()) == np.array(truth)).mean())


def shipped_accuracy(embedder: Embedder, model: torch.nn.Module, sets: Path, name: str, queries: list[str], truth: list[int]) -> float:
    """The service's own scorer (`auto`, word matches on) fitted on the vectors this model gives."""
    config = load_categories(sets / FEW_SHOT_SETS[name] / "categories.yaml")
    examples = [(text, index) for index, category in enumerate(config.categories) for text in category.examples]
    texts = [text for text, _ in examples]
    descriptions = [c.description or c.name for c in config.categories]
    scorer = fit_category_scorer(
        "auto",
        embedder.vectors(model, texts).numpy(),
        texts,
        np.array([index for _, index in examples]),
        embedder.vectors(model, descriptions).numpy(),
        category_texts(config),
        "auto",
    )
    predicted = scorer.probabilities(embedder.vectors(model, queries).numpy(), queries).argmax(axis=1)
    return float((predicted == np.array(truth)).mean())


def contrastive_pairs(labels: list[int], per_example: int, rng: random.Random) -> list[tuple[int, int, float]]:
    pairs = []
    for _ in range(per_example):
        for i, label in enumerate(labels):
            same = [j for j, other in enumerate(labels) if other == label and j != i]
            different = [j for j, other in enumerate(labels) if other != label]
            pairs += [(i, rng.choice(same), 1.0), (i, rng.choice(different), 0.0)]
    rng.shuffle(pairs)
    return pairs


def setfit_encoder(embedder: Embedder, texts: list[str], labels: list[int], per_example: int) -> torch.nn.Module:
    model = copy.deepcopy(embedder.model).train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=TUNING_LR)
    pairs = contrastive_pairs(labels, per_example, random.Random(0))
    for start in range(0, len(pairs), PAIR_BATCH):
        chunk = pairs[start : start + PAIR_BATCH]
        left = embedder.vectors(model, [texts[i] for i, _, _ in chunk], grad=True)
        right = embedder.vectors(model, [texts[j] for _, j, _ in chunk], grad=True)
        target = torch.tensor([similar for _, _, similar in chunk])
        loss = ((left * right).sum(-1) - target).pow(2).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model.eval()


def residual_adapter(examples: torch.Tensor, labels: list[int]) -> Callable[[torch.Tensor], torch.Tensor]:
    torch.manual_seed(0)
    width = examples.shape[1]
    shift = torch.nn.Sequential(torch.nn.Linear(width, 256), torch.nn.GELU(), torch.nn.Linear(256, width))
    torch.nn.init.zeros_(shift[2].weight)  # starts as the identity map
    torch.nn.init.zeros_(shift[2].bias)
    optimiser = torch.optim.AdamW(shift.parameters(), lr=ADAPTER_LR, weight_decay=0.01)
    label_tensor = torch.tensor(labels)
    target = (label_tensor[:, None] == label_tensor[None, :]).float()
    for _ in range(ADAPTER_STEPS):
        mapped = torch.nn.functional.normalize(examples + shift(examples), dim=-1)
        loss = ((mapped @ mapped.T - target) ** 2).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return lambda vectors: torch.nn.functional.normalize(vectors + shift(vectors), dim=-1).detach()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", type=Path, default=Path("docs/accuracy/sets"))
    parser.add_argument("--model", default="builtin:minilm")
    parser.add_argument("--pairs", type=int, default=5, help="contrastive pairs of each kind per example (SetFit's R)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    embedder = Embedder(args.model)
    print(
        "| set | queries | frozen + head | setfit + head | adapter + head | shipped scorer, frozen | shipped scorer, setfit | setfit tuning s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    results = []
    for name in FEW_SHOT_SETS:
        texts, labels, queries, truth = load(args.sets, name)
        frozen_examples, frozen_queries = embedder.vectors(embedder.model, texts), embedder.vectors(embedder.model, queries)
        frozen = head_accuracy(frozen_examples, labels, frozen_queries, truth)
        started = time.perf_counter()
        tuned = setfit_encoder(embedder, texts, labels, args.pairs)
        tuning_s = time.perf_counter() - started
        setfit = head_accuracy(embedder.vectors(tuned, texts), labels, embedder.vectors(tuned, queries), truth)
        adapt = residual_adapter(frozen_examples, labels)
        adapter = head_accuracy(adapt(frozen_examples), labels, adapt(frozen_queries), truth)
        shipped = shipped_accuracy(embedder, embedder.model, args.sets, name, queries, truth)
        shipped_tuned = shipped_accuracy(embedder, tuned, args.sets, name, queries, truth)
        results.append((frozen, setfit, adapter, shipped, shipped_tuned))
        cells = " | ".join(f"{figure:.3f}" for figure in results[-1])
        print(f"| {name} | {len(queries)} | {cells} | {tuning_s:.0f} |", flush=True)
    means = " | ".join(f"{figure:.3f}" for figure in np.mean(results, axis=0))
    print(f"| mean | | {means} | |")


if __name__ == "__main__":
    main()
