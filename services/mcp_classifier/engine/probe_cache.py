"""The load-time checks' answers, kept on disk so that the next start of the same model on the same host skips them.

At load the encoder checks that packed rows give the padded embeddings and compares each speed-up
with the eager model: a dozen probe forwards whose answer depends only on the model's files, the
device (the CPU or GPU model and the threads it runs on), the dtype, the engine's options and the
libraries' versions. All of them are in the key, so a second start reads the answers: a speed-up
found off stays off, one found on is applied again without its comparison. The forward's fixed cost
is not kept: it is a timing, and a start on a busy host would fix a wrong one for good; measuring it
again costs a few small forwards, which warm the model up before it is ready anyway. A folder that
cannot be read or written only costs the checks.
Hand-written: a few values in one JSON file per key, the key being the product's own.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

import torch

from ..util.omp import OMP_SPIN_COUNT_ENV, OMP_WAIT_POLICY_ENV
from .signature import prune_least_recent

log = logging.getLogger(__name__)
PROBES_FORMAT = 1  # bumped when what a check compares or how it decides changes
MAX_PROBE_FILES = 64  # per folder, least recently written first out: each model, host or option change adds one


@dataclass(frozen=True)
class ProbeResults:
    packing_agrees: bool  # packed rows gave the padded embeddings
    speed_ups: dict[str, int] = field(default_factory=dict)  # each speed-up asked for: what it changed, 0 where it is off


@cache
def processor_name() -> str:
    """The CPU's model name (it decides the kernels torch picks and what a forward costs); the machine type where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def device_identity(device: torch.device) -> str:
    """What runs the model, as far as a probe's answer goes: the GPU's name, or the CPU's with the threads torch uses
    and how they wait for each other (util.omp: it moves a CPU forward's cost)."""
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    wait = os.environ.get(OMP_WAIT_POLICY_ENV, "default").lower()
    if OMP_SPIN_COUNT_ENV in os.environ:
        wait += f"+spin{os.environ[OMP_SPIN_COUNT_ENV]}"
    return f"{device.type}:{processor_name()}:threads={torch.get_num_threads()}:wait={wait}"


class ProbeCache:
    """One model's probe results on this host, in ``directory`` under ``signature`` (engine.signature.model_signature)."""

    def __init__(self, directory: Path, signature: str) -> None:
        self.path = directory / f"probes-{signature[:32]}.json"

    def load(self) -> ProbeResults | None:
        try:
            stored = json.loads(self.path.read_text(encoding="utf-8"))
            return ProbeResults(bool(stored["packing_agrees"]), dict(stored["speed_ups"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a torn or foreign file: run the probes again
            log.warning("probe cache: ignoring %s (%s)", self.path, exc)
            return None

    def store(self, results: ProbeResults) -> None:
        temporary: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, prefix=".tmp-", suffix=".json", delete=False) as file:
                temporary = file.name
                json.dump(asdict(results), file)
            os.replace(temporary, self.path)  # atomic: replicas starting together read the old file or the new one
            prune_least_recent(self.path.parent, "probes-*.json", MAX_PROBE_FILES)
        except OSError as exc:
            log.warning("probe cache off: cannot write %s (%s)", self.path, exc)
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)
