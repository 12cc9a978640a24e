"""tokenizer_threads in a real process: the real tokenizer starts a pool of exactly that many threads, or none.

Each case is a fresh Python process (the pool's size is fixed when it starts), loading builtin:minilm
through build_classifier as every model process does, then classifying a batch. The cases differ only
in the setting, so their thread counts differ by the tokenizer's pool alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO_ROOT

CATEGORIES = """
categories:
  - {name: cooking, description: "Recipes and cooking.", examples: ["how long do I boil an egg", "a quick pasta recipe"]}
  - {name: devops, description: "Deploying and running services.", examples: ["restart a kubernetes pod", "roll back a deployment"]}
"""
CHILD = """
import os, sys
from mcp_classifier.settings import Settings
from mcp_classifier.classify.build import build_classifier
settings = Settings(
    model="builtin:minilm", torch_threads=int(sys.argv[1]), tokenizer_threads=int(sys.argv[2]), categories_file=sys.argv[3],
    forward_overhead_tokens=60.0, token_matching="off", lexical_scoring="off",
)
classifier = build_classifier(settings)
classifier.classify([f"how do I deploy service number {i} on kubernetes" for i in range(64)])
print(len(os.listdir("/proc/self/task")), os.environ.get("TOKENIZERS_PARALLELISM"), os.environ.get("RAYON_NUM_THREADS"))
"""


@pytest.fixture(scope="module")
def categories_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small categories: the child loads in seconds, and the batch it classifies is what the pool runs."""
    path = tmp_path_factory.mktemp("tokenizer-threads") / "categories.yaml"
    path.write_text(CATEGORIES)
    return path


def _start(categories_file: Path, torch_threads: int, tokenizer_threads: int, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    child_env = {k: v for k, v in os.environ.items() if k not in {"TOKENIZERS_PARALLELISM", "RAYON_NUM_THREADS"}}
    child_env.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(torch_threads), str(tokenizer_threads), str(categories_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env,
        cwd=REPO_ROOT,
    )


def _threads_after_a_batch(child: subprocess.Popen[str]) -> tuple[int, str, str]:
    """The child's thread count after its batch, and the two switches as it ran."""
    out, err = child.communicate(timeout=180)
    assert child.returncode == 0, err[-2000:]
    words = out.split()
    return int(words[-3]), words[-2], words[-1]


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc (Linux)")
def test_the_tokenizer_runs_a_pool_of_the_set_size_and_none_on_one_thread(categories_file: Path) -> None:
    # All at once (each is seconds of imports and loading); every count is taken after its own batch. All on two
    # torch threads, so each count differs from the serial one's by the tokenizer's pool alone.
    children = {
        "serial": _start(categories_file, torch_threads=2, tokenizer_threads=1),
        "three": _start(categories_file, torch_threads=2, tokenizer_threads=3),
        "auto": _start(categories_file, torch_threads=2, tokenizer_threads=0),
        "auto, env says no": _start(categories_file, torch_threads=2, tokenizer_threads=0, env={"TOKENIZERS_PARALLELISM": "false"}),
    }
    seen = {name: _threads_after_a_batch(child) for name, child in children.items()}
    assert seen["serial"][1] == "false"
    # the set size, not torch's thread count
    assert seen["three"][1:] == ("true", "3")
    assert seen["three"][0] - seen["serial"][0] == 3
    # auto on CPU: as many as the model's torch threads (here 2), whatever the machine has
    assert seen["auto"][1:] == ("true", "2")
    assert seen["auto"][0] - seen["serial"][0] == 2
    # auto defers to an explicit TOKENIZERS_PARALLELISM
    assert seen["auto, env says no"][1] == "false"
    assert seen["auto, env says no"][0] == seen["serial"][0]
