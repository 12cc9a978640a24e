"""The start cache with the real builtin:minilm: a second start answers exactly as the first, having embedded,
fitted and probed nothing; an edited categories file re-embeds only its new example."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import yaml

from mcp_classifier.classify.build import build_classifier
from mcp_classifier.engine import load_checks
from mcp_classifier.engine.encoder import TextEncoder
from mcp_classifier.settings import Settings
from tests.support.categories import DEFAULT_FILE

QUERIES = ["integrate x squared from 0 to 1", "who won the battle of hastings", "write a python function that sorts a list"]


def _embedded_counts(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("category texts:")]


def test_a_second_start_reuses_the_embeddings_the_fit_and_the_probes_and_answers_the_same(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcp_classifier")  # the load-time checks' line is an engine detail (debug)
    scoped = yaml.safe_load(DEFAULT_FILE.read_text()) | {"detect_out_of_scope": True}  # an out-of-scope model to fit and keep
    (tmp_path / "scoped.yaml").write_text(yaml.safe_dump(scoped, sort_keys=False))
    # The service's engine options (packing and fp16 weights asked for), its token matching and its scope fit.
    settings = Settings(start_cache_dir=tmp_path / "cache", categories_file=tmp_path / "scoped.yaml")
    first = build_classifier(settings)
    cold = _embedded_counts(caplog)
    assert cold and all(", 0 from the start cache" in line for line in cold)
    assert len(list((tmp_path / "cache").glob("probes-*.json"))) == 1
    caplog.clear()

    def probe_run(*_: object) -> None:
        raise AssertionError("a start with the checks' answers on disk ran a check")

    with monkeypatch.context() as patched:
        patched.setattr(load_checks, "packing_matches_padding", probe_run)
        patched.setattr(TextEncoder, "apply_speed_up", probe_run)
        second = build_classifier(settings)
    assert all(line.startswith("category texts: 0 embedded") for line in _embedded_counts(caplog))
    assert any(r.getMessage() == "fitted scorer from the start cache" for r in caplog.records)
    assert any(r.getMessage() == "fitted scope from the start cache" for r in caplog.records)
    assert any(r.getMessage().startswith("load-time checks: the answers of an earlier start") for r in caplog.records)
    assert second.encoder.applied == first.encoder.applied and second.encoder.applied  # fp16 weights: on, as checked
    assert second.encoder.pack_width == first.encoder.pack_width > 0
    off_topic = ["what is the best pizza topping", "how do I renew my passport"]
    for a, b in zip(first.classify(QUERIES + off_topic), second.classify(QUERIES + off_topic)):
        assert (a.category, a.in_scope) == (b.category, b.in_scope)
        assert a.confidence == pytest.approx(b.confidence, abs=1e-6)
        np.testing.assert_allclose(a.probabilities, b.probabilities, atol=1e-6)

    document = yaml.safe_load(DEFAULT_FILE.read_text())
    document["categories"][0]["examples"].append("what is the integral of a constant")
    edited = tmp_path / "categories.yaml"
    edited.write_text(yaml.safe_dump(document, sort_keys=False))
    caplog.clear()
    build_classifier(settings.with_values(categories_file=edited))
    assert _embedded_counts(caplog)[0].startswith("category texts: 1 embedded")


HUB_START = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
from mcp_classifier.classify.build import build_classifier
from mcp_classifier.settings import Settings
build_classifier(Settings(model="example-org/minilm-copy", start_cache_dir=sys.argv[1], categories_file=sys.argv[2]))
"""
# Two categories: the keying is what is tested, and the packaged default's hundreds of examples only lengthen the first start.
HUB_CATEGORIES = """
categories:
  - {name: cooking, description: "Recipes and cooking.", examples: ["how long do I boil an egg", "a quick pasta recipe"]}
  - {name: devops, description: "Deploying and running services.", examples: ["restart a kubernetes pod", "roll back a deployment"]}
"""


def test_a_hub_model_gets_the_start_cache_through_its_local_snapshot(tmp_path: Path) -> None:
    """A hub id (here the builtin model's files laid out as the hub's cache keeps a download) is keyed by its
    snapshot's files, so its second start embeds nothing; offline, as after a first download."""
    import os
    import shutil
    import subprocess
    import sys

    from mcp_classifier.engine.encoder import BUILTIN_MINILM, resolve_model_path

    revision = "0" * 40
    repo = tmp_path / "hub" / "models--example-org--minilm-copy"
    shutil.copytree(resolve_model_path(BUILTIN_MINILM), repo / "snapshots" / revision)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    categories = tmp_path / "categories.yaml"
    categories.write_text(HUB_CATEGORIES)

    def start() -> str:
        done = subprocess.run(
            [sys.executable, "-c", HUB_START, str(tmp_path / "cache"), str(categories)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    assert "0 from the start cache" in start()
    second = [line for line in start().splitlines() if line.startswith("category texts:")]
    assert second and all(line.startswith("category texts: 0 embedded") for line in second), second
