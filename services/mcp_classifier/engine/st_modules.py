"""What a sentence-transformers model directory says to run after the transformer, and which prompts to put first.

A sentence-transformers model is its authors' pipeline (``modules.json``): the transformer, a pooling,
then maybe Dense layers and a normalisation, plus named prompts (``config_sentence_transformers.json``).
Running the transformer and pooling alone gives another embedding than the one the model was trained
to produce. sentence-transformers itself is not imported at serve time: its loader builds the whole
model again and pulls in training dependencies, while the service needs only these few small layers
on its own batched, packed forward, so the modules are read here by hand.
"""

from __future__ import annotations

import importlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .errors import ModelLoadError
from .packing import Pooling

log = logging.getLogger(__name__)

# sentence-transformers' pooling modes that the engine runs, by both of its config spellings.
_POOLING_MODES: dict[str, Pooling] = {"mean": "mean", "cls": "cls", "lasttoken": "last"}
_LEGACY_POOLING_KEYS: dict[str, Pooling] = {
    "pooling_mode_lasttoken": "last",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
}
# Prompt names, in order of preference, for a classified query and for a document (a tool's description).
_QUERY_PROMPT_NAMES = ("query", "classification", "Classification")
_DOCUMENT_PROMPT_NAMES = ("document", "passage", "doc")


@dataclass(frozen=True)
class SentenceTransformerSpec:
    """The parts of a sentence-transformers pipeline the engine runs around its own forward."""

    pooling: Pooling | None = None  # None: the directory names none (the architecture decides)
    head: torch.nn.Sequential | None = None  # the Dense layers after pooling, in order
    output_dimensions: int | None = None  # the last Dense layer's width
    query_prompt: str = ""
    document_prompt: str = ""
    skipped: tuple[str, ...] = field(default=())  # modules listed but not run: the embedding may differ from the authors'

    @property
    def description(self) -> str:
        """What changes an embedding here, for the start cache's key."""
        dense = len(self.head) if self.head is not None else 0
        return (
            f"pooling={self.pooling} dense={dense}x{self.output_dimensions} query={self.query_prompt!r} document={self.document_prompt!r}"
        )


def read_spec(model_dir: str | Path) -> SentenceTransformerSpec:
    """The pipeline ``modules.json`` lists, and the prompts; an empty spec for a plain transformers directory."""
    root = Path(model_dir)
    modules_file = root / "modules.json"
    if not modules_file.is_file():
        return SentenceTransformerSpec()
    pooling: Pooling | None = None
    layers: list[torch.nn.Module] = []
    output_dimensions: int | None = None
    skipped: list[str] = []
    for module in sorted(json.loads(modules_file.read_text()), key=lambda m: int(m.get("idx", 0))):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        folder = root / str(module.get("path", ""))
        if kind == "Transformer":
            continue
        if kind == "Pooling":
            pooling = _pooling(folder, skipped)
        elif kind == "Dense":
            layer, output_dimensions = _dense(folder)
            layers.append(layer)
        elif kind == "Normalize":
            continue  # the engine returns unit vectors whatever the pipeline says
        else:
            skipped.append(kind)
    if skipped:
        log.warning(
            "the model's sentence-transformers modules %s are not run by this service: its embeddings may differ from "
            "sentence-transformers' own",
            ", ".join(skipped),
        )
    query_prompt, document_prompt = _prompts(root)
    return SentenceTransformerSpec(
        pooling=pooling,
        head=torch.nn.Sequential(*layers) if layers else None,
        output_dimensions=output_dimensions,
        query_prompt=query_prompt,
        document_prompt=document_prompt,
        skipped=tuple(skipped),
    )


def _pooling(folder: Path, skipped: list[str]) -> Pooling | None:
    config_file = folder / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    mode = config.get("pooling_mode")  # sentence-transformers 6 writes one key; older releases a boolean per mode
    if isinstance(mode, list):
        mode = mode[0] if len(mode) == 1 else None
    if isinstance(mode, str) and mode in _POOLING_MODES:
        pooling = _POOLING_MODES[mode]
    elif mode is None and not any(config.get(key) for key in ("pooling_mode_max_tokens", "pooling_mode_weightedmean_tokens")):
        pooling = next((p for key, p in _LEGACY_POOLING_KEYS.items() if config.get(key)), "mean")
    else:
        skipped.append(f"Pooling({mode or 'several modes'}; mean is used)")
        pooling = "mean"
    if config.get("include_prompt") is False:
        skipped.append("Pooling(include_prompt=false; the prompt's tokens are pooled too)")
    return pooling


def _dense(folder: Path) -> tuple[torch.nn.Module, int]:
    """One Dense module: a linear layer, its activation (Tanh where the config names none), an optional residual."""
    config = json.loads((folder / "config.json").read_text())
    weights = _weights(folder)
    in_features, out_features = int(config["in_features"]), int(config["out_features"])
    linear = torch.nn.Linear(in_features, out_features, bias=bool(config.get("bias", True)))
    residual = None
    if config.get("use_residual") and in_features != out_features:
        residual = torch.nn.Linear(in_features, out_features, bias=False)
    layer = _DenseLayer(linear, _activation(config.get("activation_function")), bool(config.get("use_residual")), residual)
    missing, unexpected = layer.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise ModelLoadError(f"the Dense module in {folder} does not match its weights (missing {missing}, unexpected {unexpected})")
    return layer, out_features


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    safetensors_file, torch_file = folder / "model.safetensors", folder / "pytorch_model.bin"
    if safetensors_file.is_file():
        from safetensors.torch import load_file

        return load_file(str(safetensors_file))
    if torch_file.is_file():
        return torch.load(torch_file, map_location="cpu", weights_only=True)
    raise ModelLoadError(f"the Dense module in {folder} has no weights (model.safetensors or pytorch_model.bin)")


def _activation(name: Any) -> torch.nn.Module:
    """A torch.nn activation by its dotted name; only torch's own classes, as sentence-transformers trusts by default."""
    if name is None:
        return torch.nn.Tanh()  # sentence-transformers' default, left out of a saved config
    module_name, _, class_name = str(name).rpartition(".")
    if not module_name.startswith("torch."):
        raise ModelLoadError(f"the Dense activation {name!r} is not a torch.nn class; only those are loaded")
    activation = getattr(importlib.import_module(module_name), class_name, None)
    if not (isinstance(activation, type) and issubclass(activation, torch.nn.Module)):
        raise ModelLoadError(f"the Dense activation {name!r} is not a torch.nn.Module class")
    return activation()


class _DenseLayer(torch.nn.Module):
    """sentence-transformers' Dense forward: activation(linear(x)), plus x (or its projection) with a residual."""

    def __init__(self, linear: torch.nn.Linear, activation: torch.nn.Module, use_residual: bool, residual: torch.nn.Linear | None) -> None:
        super().__init__()
        self.linear = linear
        self.activation_function = activation
        self.use_residual = use_residual
        if residual is not None:
            self.residual = residual

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.activation_function(self.linear(x))
        if self.use_residual:
            out = out + (self.residual(x) if hasattr(self, "residual") else x)
        return out


def _prompts(root: Path) -> tuple[str, str]:
    """The query and document prompts the authors name; the default prompt stands in for a missing query one."""
    config_file = root / "config_sentence_transformers.json"
    if not config_file.is_file():
        return "", ""
    config = json.loads(config_file.read_text())
    prompts = {str(k): str(v) for k, v in (config.get("prompts") or {}).items()}
    default = prompts.get(str(config.get("default_prompt_name") or ""), "")
    query = next((prompts[name] for name in _QUERY_PROMPT_NAMES if name in prompts), default)
    document = next((prompts[name] for name in _DOCUMENT_PROMPT_NAMES if name in prompts), default)
    return query, document
