"""The Helm chart, rendered by a real helm binary (../shared/tools/get-helm) and read back as YAML.

No cluster is needed: every test renders with `helm template` and looks at the objects. The same chart
is linted and validated (kubernetes-validate, helm/rayservice-schema.json) by scripts/helm_checks.sh in CI.
Beside this file: test_chart_network.py (who may reach which port, Ray token auth, the router edge) and
test_chart_crds.py (the custom resources against the operators' own CRDs, strict).
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from mcp_classifier.classify.categories import load_categories
from mcp_classifier.embedder.serve_config import REPLICA_SETTINGS
from mcp_classifier.redis_io.metrics import RedisMetrics
from mcp_classifier.settings import ENV_PREFIX, Settings, ToolFilterSettings, settings_fields
from mcp_classifier.telemetry import GatewayMetrics
from tests.support import REPO_ROOT

CHART = REPO_ROOT / "helm" / "mcp-classifier"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
PROFILES = [p.name.removesuffix("-values.yaml") for p in CI_VALUES]
GET_HELM = REPO_ROOT / "scripts" / "get_helm.sh"  # the same helm scripts/helm_checks.sh uses
RELEASE = "rel"
NAMESPACE = "mcp"
KUBE_VERSION = "1.35.0"

# Chart values -> the `mcp-classifier serve-config` flag of the same setting (settings.py field in the flag).
VALUE_FLAGS: dict[str, str] = {
    "embedder.model": "--model",
    "embedder.modelRevision": "--model-revision",
    "embedder.device": "--device",
    "embedder.dtype": "--dtype",
    "embedder.pooling": "--pooling",
    "embedder.queryInstruction": "--query-instruction",
    "embedder.maxSeqLength": "--max-seq-length",
    "embedder.ompWaitPolicy": "--omp-wait-policy",
    "embedder.ompSpinCount": "--omp-spin-count",
    "embedder.torchThreads": "--torch-threads",
    "embedder.tokenizerThreads": "--tokenizer-threads",
    "embedder.forwardOverheadTokens": "--forward-overhead-tokens",
    "embedder.packWidthTokens": "--pack-width-tokens",
    "embedder.scoringMethod": "--scoring-method",
    "embedder.middleLayerFeatures": "--middle-layer-features",
    "embedder.cudaGraphs": "--cuda-graphs",
    "embedder.fusedNorms": "--fused-norms",
    "embedder.fusedRotary": "--fused-rotary",
    "embedder.compiledLayers": "--compiled-layers",
    "embedder.fp16WeightsMaxTokens": "--fp16-weights-max-tokens",
    "embedder.lexicalScoring": "--lexical-scoring",
    "embedder.tokenMatching": "--token-matching",
    "embedder.scopeBackground": "--scope-background",
    "embedder.secondLabels": "--second-labels",
    "embedder.servedLanguages": "--served-languages",
    "embedder.languageMinConfidence": "--language-min-confidence",
    "embedder.batchSize": "--batch-size",
    "embedder.batchWindowMs": "--batch-window-ms",
    "embedder.batchSlotChars": "--batch-slot-chars",
    "embedder.maxOngoingRequests": "--max-ongoing-requests",
    "embedder.cpusPerReplica": "--replica-num-cpus",
    "embedder.cpuPinning": "--replica-cpu-pinning",
    "embedder.gpusPerReplica": "--replica-num-gpus",
    "embedder.targetOngoingRequests": "--target-ongoing-requests",
    "embedder.healthCheckPeriodS": "--replica-health-check-period-s",
    "embedder.accessLog": "--replica-access-log",
    "embedder.replicas.min": "--min-replicas",
    "embedder.replicas.max": "--max-replicas",
    "serve.appName": "--serve-app-name",
    "serve.grpcPort": "--serve-grpc-port",
}
CATEGORIES_FILE = "/etc/mcp-classifier/categories/categories.yaml"
CLASSIFIERS_DIR = "/etc/mcp-classifier/classifiers"  # each named classifier's file is NAME.yaml here
# Settings of the cache/edge work (issue 4) that the chart sets. Until they exist in settings.py they are
# accepted by name; once any of them exists, every one must be a real field (a rename then fails here).
CACHE_EDGE_SETTINGS = {
    "redis_url",
    "api_keys_file",
    "cache",
    "cache_ttl_s",
    "rate_limit_requests",
    "rate_limit_window_s",
    "allowed_origins",
    "allowed_hosts",
}
PENDING_SETTINGS = set() if CACHE_EDGE_SETTINGS & set(settings_fields()) else CACHE_EDGE_SETTINGS
# The file with the Ray token the gateway sends to the Serve REST API of a token-protected cluster (direct ingress):
# accepted by name until the gateway has the setting.
RAY_AUTH_SETTINGS = {"ray_auth_token_file"}
PENDING_SETTINGS |= set() if RAY_AUTH_SETTINGS & set(settings_fields()) else RAY_AUTH_SETTINGS
GATEWAY_CONFIG_FLAGS = {
    "logLevel": "--log-level",
    "logFormat": "--log-format",
    "maxTextLength": "--max-text-length",
    "maxBodyBytes": "--max-body-bytes",
    "requestTimeoutS": "--request-timeout-s",
    "maxQueue": "--max-queue",
    "batchWindowMs": "--batch-window-ms",
    "batchRegroupWait": "--batch-regroup-wait",
    "maxConcurrentBatches": "--max-concurrent-batches",
    "grpcMaxAttempts": "--grpc-max-attempts",
    "cache": "--cache",
    "cacheTtlS": "--cache-ttl-s",
    "rateLimitRequests": "--rate-limit-requests",
    "sseMaxStreams": "--sse-max-streams",
    "sseKeepaliveS": "--sse-keepalive-s",
    "sseSessionIdleS": "--sse-session-idle-s",
    "rateLimitWindowS": "--rate-limit-window-s",
    "allowedOrigins": "--allowed-origins",
    "allowedHosts": "--allowed-hosts",
}
# gateway.toolFeedback.* -> the flag of the same setting (the semantic tool filter's feedback from use).
TOOL_FEEDBACK_FLAGS = {
    "enabled": "--tool-feedback",
    "maxVectors": "--tool-feedback-max-vectors",
    "ttlS": "--tool-feedback-ttl-s",
    "refreshS": "--tool-feedback-refresh-s",
    "weight": "--tool-feedback-weight",
}


# ---- helm ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The helm command line: the same binary scripts/helm_checks.sh uses, with throwaway helm homes."""
    found = subprocess.run(["bash", str(GET_HELM)], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert found.returncode == 0, f"no helm: {found.stderr}"
    binary = str(REPO_ROOT / found.stdout.strip()) if not os.path.isabs(found.stdout.strip()) else found.stdout.strip()
    home = tmp_path_factory.mktemp("helm-home")
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        os.environ[var] = str(home / var.lower())
    return [binary]


def helm_template(
    helm: list[str], tmp_path: Path, *, values_files: Iterable[Path] = (), values: dict[str, Any] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    args = [*helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for path in values_files:
        args += ["-f", str(path)]
    if values is not None:
        extra = tmp_path / f"values-{len(list(tmp_path.iterdir()))}.yaml"
        extra.write_text(yaml.safe_dump(values))
        args += ["-f", str(extra)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"helm template failed:\n{result.stderr}")
    return result


def render(helm: list[str], tmp_path: Path, values: dict[str, Any] | None = None, profile: str | None = None) -> list[dict[str, Any]]:
    files = [CHART / "ci" / f"{profile}-values.yaml"] if profile else []
    out = helm_template(helm, tmp_path, values_files=files, values=values).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.fixture(scope="session")
def rendered(helm: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Every ci/*-values.yaml profile, rendered once per session."""
    tmp = tmp_path_factory.mktemp("renders")
    return {profile: render(helm, tmp, profile=profile) for profile in PROFILES}


# ---- helpers over rendered objects ------------------------------------------------------------
def find(docs: list[dict[str, Any]], kind: str, name_suffix: str = "") -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]


def one(docs: list[dict[str, Any]], kind: str, name_suffix: str = "") -> dict[str, Any]:
    found = find(docs, kind, name_suffix)
    assert len(found) == 1, f"expected one {kind} *{name_suffix}, found {[d['metadata']['name'] for d in found]}"
    return found[0]


def gateway(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(docs, "Deployment", "-gateway")


def ray_groups(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cluster = one(docs, "RayService")["spec"]["rayClusterConfig"]
    return cluster["headGroupSpec"], cluster["workerGroupSpecs"]


def pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every pod spec the chart creates, by a readable name: Deployments, the RayService groups, the test pod."""
    specs = {d["metadata"]["name"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Deployment"}
    if find(docs, "RayService"):
        head, workers = ray_groups(docs)
        specs["ray-head"] = head["template"]["spec"]
        specs.update({f"ray-{w['groupName']}": w["template"]["spec"] for w in workers})
    specs.update({d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "Pod"})
    return specs


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def serve_config_v2(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return yaml.safe_load(one(docs, "RayService")["spec"]["serveConfigV2"])


def values_of(profile: str) -> dict[str, Any]:
    """values.yaml merged with a ci profile (Helm's deep merge)."""

    def merge(base: Any, over: Any) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            return {k: merge(base.get(k), over[k]) if k in base else over[k] for k in over} | {
                k: v for k, v in base.items() if k not in over
            }
        return over

    merged = yaml.safe_load((CHART / "values.yaml").read_text())
    if profile:
        merged = merge(merged, yaml.safe_load((CHART / "ci" / f"{profile}-values.yaml").read_text()) or {})
    return merged


def dig(values: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        values = values[part]
    return values


def serve_config_cli(flags: list[str], *, in_process: bool = True) -> dict[str, Any]:
    """What `mcp-classifier serve-config FLAGS` prints, parsed. In-process runs the same main() (a new
    Python costs ~3 s here, the CLI imports torch); the subprocess form is used once to prove the real CLI."""
    if not in_process:
        env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        out = subprocess.run(
            [sys.executable, "-m", "mcp_classifier.cli", "serve-config", *flags],
            capture_output=True,
            text=True,
            check=True,
            env=env,
            timeout=120,
        ).stdout
        return yaml.safe_load(out)
    import contextlib
    import io

    from mcp_classifier.cli import main

    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(ENV_PREFIX)}
    try:
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            assert main(["serve-config", *flags]) == 0
    finally:
        os.environ.update(saved)
    return yaml.safe_load(stdout.getvalue())


def flags_for(values: dict[str, Any]) -> list[str]:
    flags: list[str] = []
    for dotted, flag in VALUE_FLAGS.items():
        value = dig(values, dotted)
        if isinstance(value, bool):  # BooleanOptionalAction: --flag / --no-flag
            flags.append(flag if value else "--no-" + flag.removeprefix("--"))
        else:
            flags += [flag, str(value)]
    if values["categories"]["content"] or values["categories"]["existingConfigMap"]:
        flags += ["--categories-file", CATEGORIES_FILE]
    for name in sorted(values.get("classifiers") or {}):
        flags += ["--classifier", f"{name}={CLASSIFIERS_DIR}/{name}.yaml"]
    return flags


# ---- serveConfigV2 == `mcp-classifier serve-config` -------------------------------------------
@pytest.mark.parametrize("profile", PROFILES)
def test_serve_config_v2_equals_the_cli_for_every_ci_profile(rendered: dict[str, list[dict[str, Any]]], profile: str) -> None:
    chart = serve_config_v2(rendered[profile])
    cli = serve_config_cli(flags_for(values_of(profile)), in_process=profile != "production")
    assert chart == cli


ALL_DEFAULTS = {  # every replica setting at its Settings default: serve-config lists none of them
    "model": "builtin:minilm",
    "modelRevision": "",
    "modelDelivery": {"mode": "image"},
    "device": "auto",
    "dtype": "auto",
    "pooling": "auto",
    "queryInstruction": "auto",
    "maxSeqLength": 256,
    "ompWaitPolicy": "passive",
    "ompSpinCount": 30000,
    "torchThreads": 0,
    "tokenizerThreads": 0,
    "forwardOverheadTokens": 0,
    "packWidthTokens": 64,
    "cudaGraphs": "auto",
    "fusedNorms": "auto",
    "fusedRotary": "auto",
    "compiledLayers": "auto",
    "fp16WeightsMaxTokens": 128,
    "scoringMethod": "auto",
    "middleLayerFeatures": "off",
    "lexicalScoring": "auto",
    "tokenMatching": "auto",
    "scopeBackground": True,
    "secondLabels": "parts",
    "servedLanguages": "auto",
    "languageMinConfidence": 0.9,
    "batchSize": 32,
    "gpusPerReplica": 0,
    "cpusPerReplica": 1,
    "cpuPinning": "auto",
    "workers": {"gpusPerPod": 0, "tolerations": []},
}
ALL_CHANGED = {  # every setting away from its default, odd numbers included
    "model": "acme/qwen3-embedding-tuned",
    "modelRevision": "0123456789abcdef0123456789abcdef01234567",
    "device": "cuda",
    "dtype": "float16",
    "pooling": "last",
    "queryInstruction": "always",
    "maxSeqLength": 1024,
    "ompWaitPolicy": "active",
    "ompSpinCount": 7777,
    "torchThreads": 3,
    "tokenizerThreads": 5,
    "forwardOverheadTokens": 48.5,
    "packWidthTokens": 0,
    "cudaGraphs": "off",
    "fusedNorms": "off",
    "fusedRotary": "off",
    "compiledLayers": "off",
    "fp16WeightsMaxTokens": 0,
    "scoringMethod": "linear",
    "middleLayerFeatures": "on",
    "lexicalScoring": "off",
    "tokenMatching": "off",
    "scopeBackground": False,
    "secondLabels": "off",
    "servedLanguages": "en,de",
    "languageMinConfidence": 0.75,
    "batchSize": 96,
    "batchWindowMs": 7.5,
    "batchSlotChars": 300,
    "maxOngoingRequests": 48,
    "cpusPerReplica": 0.5,
    "cpuPinning": "off",
    "gpusPerReplica": 0.5,
    "targetOngoingRequests": 12.5,
    "healthCheckPeriodS": 4.5,
    "accessLog": True,
    "replicas": {"min": 0, "max": 7},
    "workers": {"gpusPerPod": 2, "maxReplicas": 4},
}


@pytest.mark.parametrize("embedder", [ALL_DEFAULTS, ALL_CHANGED], ids=["settings-defaults", "all-changed"])
def test_serve_config_v2_lists_replica_settings_exactly_like_the_cli(helm: list[str], tmp_path: Path, embedder: dict[str, Any]) -> None:
    overrides = {
        "embedder": embedder,
        "serve": {"appName": "router-classifier", "grpcPort": 9443},
        "categories": {"existingConfigMap": "my-categories"},
        "classifiers": {"guard": {"configMap": {"name": "my-classifiers"}}} if embedder is ALL_CHANGED else {},
    }
    docs = render(helm, tmp_path, overrides)
    merged = values_of("")
    for key, value in overrides.items():
        for sub, v in value.items():
            merged[key][sub] = {**merged[key].get(sub, {}), **v} if isinstance(v, dict) else v
    chart = serve_config_v2(docs)
    assert chart == serve_config_cli(flags_for(merged))
    settings = chart["applications"][0]["args"]["settings"]
    if embedder is ALL_DEFAULTS:
        assert settings == {"categories_file": CATEGORIES_FILE}
    else:
        # the template knows every replica setting, the named classifiers (the classifiers value) included
        assert set(settings) == set(REPLICA_SETTINGS)
        # the gateway coalesces batches of the same size the replicas take
        cm = one(docs, "ConfigMap", "-gateway")
        assert cm["data"]["MCP_CLASSIFIER_BATCH_SIZE"] == "96"


def test_serve_config_v2_is_a_valid_ray_serve_config(rendered: dict[str, list[dict[str, Any]]]) -> None:
    from ray.serve.schema import ServeDeploySchema

    for profile, docs in rendered.items():
        config = ServeDeploySchema.model_validate(serve_config_v2(docs))
        assert config.grpc_options.port == values_of(profile)["serve"]["grpcPort"]


def test_every_profiles_gateway_logs_json_lines(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """A pod has no terminal, so the CLI's auto would pick JSON too; the chart says it outright for log pipelines."""
    for profile, docs in rendered.items():
        assert one(docs, "ConfigMap", "-gateway")["data"]["MCP_CLASSIFIER_LOG_FORMAT"] == "json", profile


# ---- GPUs --------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["default", "production"])
def test_the_worker_group_requests_gpus_with_requests_equal_to_limits(rendered: dict[str, list[dict[str, Any]]], profile: str) -> None:
    docs = rendered[profile]
    head, workers = ray_groups(docs)
    assert head["rayStartParams"]["num-cpus"] == "0"
    (group,) = workers
    values = values_of(profile)["embedder"]["workers"]
    assert (group["minReplicas"], group["maxReplicas"]) == (values["minReplicas"], values["maxReplicas"])
    spec = group["template"]["spec"]
    (container,) = spec["containers"]
    gpus = values["gpusPerPod"]
    assert gpus >= 1
    assert container["resources"]["requests"]["nvidia.com/gpu"] == container["resources"]["limits"]["nvidia.com/gpu"] == gpus
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec.get("nodeSelector", {}) == values["nodeSelector"]
    assert serve_config_v2(docs)["applications"][0]["deployments"][0]["ray_actor_options"]["num_gpus"] >= 1
    # no GPU on the head
    assert "nvidia.com/gpu" not in json.dumps(head)


def test_the_cpu_only_profile_asks_for_no_gpu_anywhere(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["cpu-only"]
    assert "nvidia.com/gpu" not in json.dumps(docs)
    _, (group,) = ray_groups(docs)
    assert "tolerations" not in group["template"]["spec"]
    assert serve_config_v2(docs)["applications"][0]["deployments"][0]["ray_actor_options"]["num_gpus"] == 0


def test_ray_version_is_the_single_value_of_the_chart(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for profile, docs in rendered.items():
        assert one(docs, "RayService")["spec"]["rayClusterConfig"]["rayVersion"] == values_of(profile)["embedder"]["rayVersion"]


# ---- gateway → RayService serve service ---------------------------------------------------------
def test_the_gateway_backend_is_the_rayservice_serve_service_grpc_port(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for profile, docs in rendered.items():
        port = values_of(profile)["serve"]["grpcPort"]
        rayservice = one(docs, "RayService")
        serve_svc = f"{rayservice['metadata']['name']}-serve-svc"  # KubeRay's name for it
        assert one(docs, "ConfigMap", "-gateway")["data"]["MCP_CLASSIFIER_BACKEND"] == f"grpc://{serve_svc}:{port}"
        # KubeRay keeps only the port named "serve" on that Service: it is the gRPC proxy's
        assert rayservice["spec"]["serveService"]["spec"]["ports"] == [{"name": "serve", "port": port, "protocol": "TCP"}]
        assert serve_config_v2(docs)["grpc_options"]["port"] == port
        # ...and no Ray container names a port "serve", so KubeRay's proxy health checks stay on HTTP :8000
        head, workers = ray_groups(docs)
        for group in [head, *workers]:
            for container in group["template"]["spec"]["containers"]:
                names = {p["name"]: p["containerPort"] for p in container["ports"]}
                assert "serve" not in names and names["grpc"] == port


# ---- HPA, PDB, probes, drain ------------------------------------------------------------------
def test_hpa_on_means_the_deployment_has_no_replicas(rendered: dict[str, list[dict[str, Any]]]) -> None:
    production = rendered["production"]
    assert "replicas" not in gateway(production)["spec"]
    hpa = one(production, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": gateway(production)["metadata"]["name"]}
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] > 0
    pdb = one(production, "PodDisruptionBudget", "-gateway")
    # one pod at a time whatever the HPA's count: minAvailable 1 would let a drain take all but one of 12
    assert "minAvailable" not in pdb["spec"]
    assert (
        pdb["spec"]["maxUnavailable"] == 1
        and pdb["spec"]["selector"]["matchLabels"] == gateway(production)["spec"]["selector"]["matchLabels"]
    )
    # without the HPA the replicas are explicit
    default = rendered["default"]
    assert gateway(default)["spec"]["replicas"] == 1 and not find(default, "HorizontalPodAutoscaler")


def test_rendering_fails_on_inconsistent_values(helm: list[str], tmp_path: Path) -> None:
    cases = {
        "minReplicas (5) must not exceed": {"gateway": {"hpa": {"enabled": True, "minReplicas": 5, "maxReplicas": 3}}},
        "terminationGracePeriodSeconds (12) must exceed": {"gateway": {"terminationGracePeriodSeconds": 12}},
        "not both": {"externalRedis": {"url": "redis://cache:6379/0"}},
        "the gateway needs Redis": {"redis": {"enabled": False}},
        "needs GPU workers": {"embedder": {"workers": {"gpusPerPod": 0}}},
        "could never become ready": {"embedder": {"replicas": {"min": 3}, "workers": {"maxReplicas": 2}}},
        "set only one of minAvailable": {"gateway": {"pdb": {"enabled": True, "minAvailable": 1, "maxUnavailable": 1}}},
    }
    for message, values in cases.items():
        result = helm_template(helm, tmp_path, values=values, check=False)
        assert result.returncode != 0 and message in result.stderr, (message, result.stderr)


def test_gateway_pods_are_locked_down_probed_spread_and_drained(rendered: dict[str, list[dict[str, Any]]]) -> None:
    values = values_of("default")["gateway"]
    deployment = gateway(rendered["default"])
    template = deployment["spec"]["template"]
    spec = template["spec"]
    (container,) = spec["containers"]
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0
    assert spec["automountServiceAccountToken"] is False
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["startupProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert re.fullmatch(r"[0-9a-f]{64}", template["metadata"]["annotations"]["checksum/config"])
    spreads = spec["topologySpreadConstraints"]
    assert {s["topologyKey"] for s in spreads} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert all(s["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"] for s in spreads)
    # grace period > preStop sleep + the server's own drain (shutdown_timeout_s, uvicorn's graceful shutdown)
    drain = math.ceil(Settings().serving.shutdown_timeout_s)
    helper = (CHART / "templates" / "_helpers.tpl").read_text()
    assert int(re.search(r'define "mcp-classifier.gateway.shutdownSeconds" -}}(\d+)', helper).group(1)) == drain
    assert container["lifecycle"]["preStop"] == {"sleep": {"seconds": values["preStopSleepSeconds"]}}
    assert spec["terminationGracePeriodSeconds"] > values["preStopSleepSeconds"] + drain


def test_the_config_checksum_changes_with_the_settings(helm: list[str], tmp_path: Path) -> None:
    def checksum(values: dict[str, Any]) -> str:
        return gateway(render(helm, tmp_path, values))["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    assert checksum({}) != checksum({"gateway": {"config": {"maxTextLength": 4096}}})


def test_every_mcp_classifier_variable_is_a_setting(rendered: dict[str, list[dict[str, Any]]]) -> None:
    fields = set(settings_fields()) | PENDING_SETTINGS
    for profile, docs in rendered.items():
        names = set(one(docs, "ConfigMap", "-gateway")["data"])
        for spec in pod_specs(docs).values():
            for container in spec["containers"]:
                names |= set(env_of(container))
        ours = {n for n in names if n.startswith(ENV_PREFIX)}
        assert ours, profile
        unknown = {n for n in ours if n.removeprefix(ENV_PREFIX).lower() not in fields}
        assert not unknown, f"{profile}: not settings: {unknown}"


# ---- NetworkPolicy -------------------------------------------------------------------------------
LOCUST_SCHEMA = REPO_ROOT / "helm" / "locusttest-schema.json"
LOCUSTFILE = REPO_ROOT / "services" / "mcp_classifier" / "loadtest" / "locustfile.py"


def test_loadtest_renders_a_locusttest_for_the_operator_aimed_at_the_gateway_service(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["loadtest"]
    wanted = values_of("loadtest")["loadtest"]
    locust_test = one(docs, "LocustTest")
    assert locust_test["apiVersion"] == "locust.io/v1"  # the operator's chart 0.1.6 and later (loadtest.apiGroup)
    jsonschema.Draft7Validator(json.loads(LOCUST_SCHEMA.read_text())).validate(locust_test)
    spec = locust_test["spec"]
    assert spec["workers"] == wanted["workers"]
    service = one(docs, "Service", "-gateway")
    port = service["spec"]["ports"][0]["port"]
    assert f"--host http://{service['metadata']['name']}:{port}" in spec["args"]
    assert f"--expect-workers {wanted['workers']}" in spec["args"]
    # the step shape holds its own users and length from the end of the warm-up: no --users/--run-time to cut it short
    assert "--run-time" not in spec["args"] and "--users" not in spec["args"]
    # --autostart keeps the master's web UI, which the operator polls for the status columns; --headless would not
    assert "--autostart --autoquit 60 " in spec["args"] and "--headless" not in spec["args"]
    # the locustfile is the project's own, from a ConfigMap
    configmap = one(docs, "ConfigMap", "-locustfile")
    assert spec["locustfile"] == {"configMap": {"name": configmap["metadata"]["name"]}}
    assert configmap["data"]["locustfile.py"] == LOCUSTFILE.read_text().rstrip("\n")
    env = {e["name"]: e["value"] for e in spec["env"]}
    assert env["MCP_LOADTEST_SHAPE"] == "steps" and env["MCP_LOADTEST_HIT_RATIO"] == "0.5"
    assert (env["MCP_LOADTEST_STEPS"], env["MCP_LOADTEST_STEP_S"]) == (wanted["steps"], str(wanted["stepSeconds"]))
    assert {"MCP_LOADTEST_SLO_P99_MS", "MCP_LOADTEST_MAX_FAILURE_RATIO", "MCP_LOADTEST_WARMUP_TIMEOUT_S"} <= set(env)
    chart_defaults = yaml.safe_load((CHART / "values.yaml").read_text())["loadtest"]
    assert spec["master"]["resources"] == chart_defaults["master"]["resources"]
    assert spec["worker"]["resources"] == chart_defaults["worker"]["resources"]
    # the operator's pods carry our labels (it puts master.labels and worker.labels on the pods, spec.labels on
    # its Jobs and Services), and the gateway's NetworkPolicy lets exactly those in
    assert spec["labels"] == spec["master"]["labels"] == spec["worker"]["labels"] == _selector("loadtest")["matchLabels"]
    (rule,) = one(docs, "NetworkPolicy", "-gateway")["spec"]["ingress"]
    assert {"podSelector": _selector("loadtest")} in rule["from"]
    for profile, profile_docs in rendered.items():
        if profile != "loadtest":
            assert not find(profile_docs, "LocustTest"), profile
            assert '"app.kubernetes.io/component": "loadtest"' not in json.dumps(profile_docs), profile


def test_the_locusttest_schema_rejects_a_misspelled_field_and_a_missing_locustfile(rendered: dict[str, list[dict[str, Any]]]) -> None:
    schema = json.loads(LOCUST_SCHEMA.read_text())
    doc = json.loads(json.dumps(one(rendered["loadtest"], "LocustTest")))
    doc["spec"]["worker"]["resource"] = {"limits": {"cpu": "1"}}
    with pytest.raises(jsonschema.ValidationError, match="resource"):
        jsonschema.validate(doc, schema)
    doc = json.loads(json.dumps(one(rendered["loadtest"], "LocustTest")))
    doc["spec"]["locustfile"] = {}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def _selector(component: str) -> dict[str, Any]:
    return {
        "matchLabels": {
            "app.kubernetes.io/name": "mcp-classifier",
            "app.kubernetes.io/instance": RELEASE,
            "app.kubernetes.io/component": component,
        }
    }


DNS_RULE = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ],
    "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
}
EMBEDDER_RULE = {  # Serve's gRPC proxy; with direct ingress (the default) the replicas' own ports and the Serve REST API
    "to": [{"podSelector": _selector("embedder")}],
    "ports": [{"port": 9000, "protocol": "TCP"}, {"port": 40000, "endPort": 41000, "protocol": "TCP"}, {"port": 8265, "protocol": "TCP"}],
}


def test_network_policy_egress_is_exactly_dns_redis_ray_serve_grpc_and_otlp(rendered: dict[str, list[dict[str, Any]]]) -> None:
    production = one(rendered["production"], "NetworkPolicy", "-gateway")["spec"]
    assert production["policyTypes"] == ["Ingress", "Egress"]
    assert production["egress"] == [
        DNS_RULE,
        {"to": [{"podSelector": _selector("redis")}], "ports": [{"port": 6379, "protocol": "TCP"}]},
        # direct ingress off in production: Serve's gRPC proxy only, not the replicas' ports nor the head's dashboard
        {"to": EMBEDDER_RULE["to"], "ports": [{"port": 9000, "protocol": "TCP"}]},
        {
            "ports": [{"port": 4317, "protocol": "TCP"}],
            "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}],
        },
    ]
    # external Redis: its port comes from the URL (6380), its peers from values; no OTLP rule without tracing
    external = one(rendered["external-redis"], "NetworkPolicy", "-gateway")["spec"]
    assert external["egress"] == [
        DNS_RULE,
        {"ports": [{"port": 6380, "protocol": "TCP"}], "to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]},
        EMBEDDER_RULE,
    ]
    assert not find(rendered["external-redis"], "NetworkPolicy", "-redis")
    assert not find(rendered["default"], "NetworkPolicy")


def test_network_policy_ingress_is_the_gateway_port_from_the_configured_sources(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["production"]
    (rule,) = one(docs, "NetworkPolicy", "-gateway")["spec"]["ingress"]
    assert rule["ports"] == [{"port": 8080, "protocol": "TCP"}, {"port": 50051, "protocol": "TCP"}], "HTTP, and gRPC (on in this profile)"
    configured = values_of("production")["networkPolicy"]["ingress"]["from"]
    assert rule["from"] == [*configured, {"podSelector": _selector("test")}]
    assert one(docs, "Pod")["metadata"]["labels"]["app.kubernetes.io/component"] == "test"
    redis = one(docs, "NetworkPolicy", "-redis")["spec"]
    assert redis["ingress"] == [{"from": [{"podSelector": _selector("gateway")}], "ports": [{"port": 6379, "protocol": "TCP"}]}]
    assert redis["egress"] == []
    # no `from` at all: any source, still only the gateway port
    (open_rule,) = one(rendered["external-redis"], "NetworkPolicy", "-gateway")["spec"]["ingress"]
    assert open_rule == {"ports": [{"port": 8080, "protocol": "TCP"}]}


def test_the_public_grpc_api_opens_on_the_pod_the_service_and_the_env_only_when_enabled(rendered: dict[str, list[dict[str, Any]]]) -> None:
    prod, default = rendered["production"], rendered["default"]
    container = gateway(prod)["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "grpc", "containerPort": 50051, "protocol": "TCP"} in container["ports"]
    service_ports = {p["name"]: p for p in one(prod, "Service", "-gateway")["spec"]["ports"]}
    assert service_ports["grpc"]["targetPort"] == "grpc" and service_ports["grpc"]["appProtocol"] == "grpc"
    env = one(prod, "ConfigMap", "-gateway")["data"]
    assert (env["MCP_CLASSIFIER_GRPC_PORT"], env["MCP_CLASSIFIER_GRPC_REFLECTION"]) == ("50051", "false")
    assert "MCP_CLASSIFIER_GRPC_PORT" not in one(default, "ConfigMap", "-gateway")["data"]
    assert [p["name"] for p in one(default, "Service", "-gateway")["spec"]["ports"]] == ["http"]


# ---- monitoring ----------------------------------------------------------------------------------
DASHBOARD_FILE = CHART / "files" / "grafana-dashboard.json"
DASHBOARD_KEY = "mcp-classifier-gateway.json"
PROMQL_METRIC = re.compile(r"\bmcp_classifier_[a-z0-9_]+")
SERIES_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def gateway_series() -> set[str]:
    """Every series name the gateway's /metrics can carry: its own metrics and the cache's, on one registry."""
    metrics = GatewayMetrics()
    RedisMetrics(metrics.registry)
    return {family.name + suffix for family in metrics.registry.collect() for suffix in SERIES_SUFFIXES[family.type]}


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    panels = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    variables = [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return panels + variables


def test_the_grafana_dashboard_is_a_sidecar_configmap_only_when_enabled(rendered: dict[str, list[dict[str, Any]]]) -> None:
    assert values_of("default")["gateway"]["grafanaDashboard"]["enabled"] is False
    assert not find(rendered["default"], "ConfigMap", "-dashboard")
    configmap = one(rendered["production"], "ConfigMap", "-gateway-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["labels"]["app.kubernetes.io/component"] == "gateway"
    shipped = json.loads(configmap["data"][DASHBOARD_KEY])
    # the file as it is, but for a uid and title of this release: two releases in one Grafana do not share a dashboard
    assert {k: v for k, v in shipped.items() if k not in ("uid", "title")} == {
        k: v for k, v in json.loads(DASHBOARD_FILE.read_text()).items() if k not in ("uid", "title")
    }
    assert shipped["uid"] == f"{RELEASE}-mcp-classifier-gateway" and RELEASE in shipped["title"]


def test_two_releases_get_two_dashboard_uids(helm: list[str], tmp_path: Path) -> None:
    """Grafana keys dashboards by uid (at most 40 characters): a shared one would make two releases overwrite each other."""
    values = tmp_path / "dashboard.yaml"
    values.write_text(yaml.safe_dump({"gateway": {"grafanaDashboard": {"enabled": True}}}))
    uids = set()
    for release in ("search-prod", "a-release-name-long-enough-to-be-truncated-by-grafana"):
        out = subprocess.run(
            [*helm, "template", release, str(CHART), "-n", NAMESPACE, "-f", str(values)], capture_output=True, text=True, check=True
        ).stdout
        configmap = one([d for d in yaml.safe_load_all(out) if d], "ConfigMap", "-gateway-dashboard")
        uid = json.loads(configmap["data"][DASHBOARD_KEY])["uid"]
        assert 0 < len(uid) <= 40 and uid.startswith(release[:20])
        uids.add(uid)
    assert len(uids) == 2


def test_the_dashboards_extra_labels_and_annotations_reach_the_configmap(helm: list[str], tmp_path: Path) -> None:
    extra = {"labels": {"team": "search"}, "annotations": {"grafana_folder": "MCP"}}
    docs = render(helm, tmp_path, {"gateway": {"grafanaDashboard": {"enabled": True, **extra}}})
    metadata = one(docs, "ConfigMap", "-gateway-dashboard")["metadata"]
    assert metadata["labels"]["team"] == "search" and metadata["labels"]["grafana_dashboard"] == "1"
    assert metadata["annotations"] == {"grafana_folder": "MCP"}


def test_every_metric_the_dashboard_queries_is_one_the_gateway_exports() -> None:
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    used = {name for query in dashboard_queries(dashboard) for name in PROMQL_METRIC.findall(query)}
    assert used, "the dashboard queries the gateway's metrics"
    assert used <= gateway_series(), f"not exported: {sorted(used - gateway_series())}"
    shown = " ".join(dashboard_queries(dashboard))
    for wanted in ("door_requests", "door_errors", "door_request_seconds_bucket", "cache_hits", "batch_size", "queue_depth"):
        assert wanted in shown, f"the dashboard shows {wanted}"
    quantiles = set(re.findall(r"histogram_quantile\((0\.\d+), sum by \(door", shown))
    assert quantiles == {"0.5", "0.99"}, "p50 and p99 by door"


def replica_series() -> set[str]:
    """The replicas' own metrics as Ray exports them (prefixed ray_), read from where the deployment declares them."""
    source = (REPO_ROOT / "services" / "mcp_classifier" / "embedder" / "deployment.py").read_text()
    declared = re.findall(r'(Histogram|Gauge|Counter)\(\s*"(mcp_classifier_embedder_[a-z0-9_]+)"', source)
    assert declared, "the deployment declares its metrics"
    suffixes = {"Histogram": ("_bucket", "_sum", "_count"), "Gauge": ("",), "Counter": ("_total",)}
    return {f"ray_{name}{suffix}" for kind, name in declared for suffix in suffixes[kind]}


def test_the_dashboard_shows_each_replicas_batches_queue_and_forward_from_metrics_the_replicas_export() -> None:
    dashboard = json.loads(DASHBOARD_FILE.read_text())
    queries = dashboard_queries(dashboard)
    used = {name for query in queries for name in re.findall(r"\bray_mcp_classifier_[a-z0-9_]+", query)}
    assert used <= replica_series(), f"not exported by the replicas: {sorted(used - replica_series())}"
    per_replica = [q for q in queries if "ray_mcp_classifier_embedder" in q and "by (replica" in q]
    for wanted in ("batch_size_sum", "queue_depth", "forward_seconds_bucket", "queue_wait_seconds_bucket"):
        assert any(wanted in q for q in per_replica), f"the dashboard shows {wanted} per replica"


# ---- secrets -------------------------------------------------------------------------------------
def test_api_keys_are_a_mounted_secret_file_and_nowhere_else(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["external-redis"]
    keys = values_of("external-redis")["auth"]["apiKeys"]
    (secret,) = [d for d in docs if d["kind"] == "Secret" and "api-keys" in d["data"]]
    assert base64.b64decode(secret["data"]["api-keys"]).decode().split() == keys
    others = json.dumps([d for d in docs if d is not secret])
    for key in keys:
        assert key not in others and base64.b64encode(key.encode()).decode() not in others
    for spec_name, spec in pod_specs(docs).items():
        for container in spec["containers"]:
            for var in container.get("env", []):
                ref = var.get("valueFrom", {}).get("secretKeyRef", {})
                assert ref.get("name") != secret["metadata"]["name"], f"{spec_name}: API keys in env {var['name']}"
            for source in container.get("envFrom", []):
                assert "secretRef" not in source
    for cm in find(docs, "ConfigMap"):
        assert not any(key in json.dumps(cm) for key in keys)
    # the gateway reads them from the mounted file
    spec = gateway(docs)["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    (volume,) = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == secret["metadata"]["name"]]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True
    keys_file = one(docs, "ConfigMap", "-gateway")["data"]["MCP_CLASSIFIER_API_KEYS_FILE"]
    assert keys_file == f"{mount['mountPath']}/{volume['secret']['items'][0]['path']}"


def test_an_existing_api_keys_secret_is_mounted_and_not_created(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["production"]
    assert not find(docs, "Secret")
    volumes = gateway(docs)["spec"]["template"]["spec"]["volumes"]
    assert {"secretName": "mcp-classifier-api-keys", "defaultMode": 0o440, "items": [{"key": "api-keys", "path": "api-keys"}]} in [
        v.get("secret") for v in volumes
    ]
    # the helm test pod authenticates with the same file
    test_pod = one(docs, "Pod")["spec"]
    assert any(v.get("secret", {}).get("secretName") == "mcp-classifier-api-keys" for v in test_pod["volumes"])
    # no keys configured: nothing mounted, no keys file setting
    default = rendered["default"]
    assert "MCP_CLASSIFIER_API_KEYS_FILE" not in one(default, "ConfigMap", "-gateway")["data"]


def test_the_redis_password_comes_from_a_secret(rendered: dict[str, list[dict[str, Any]]]) -> None:
    (container,) = gateway(rendered["external-redis"])["spec"]["template"]["spec"]["containers"]
    env = [e["name"] for e in container["env"]]
    variables = env_of(container)
    assert variables["REDIS_PASSWORD"]["valueFrom"] == {"secretKeyRef": {"name": "mcp-classifier-redis", "key": "password"}}
    assert env.index("REDIS_PASSWORD") < env.index("MCP_CLASSIFIER_REDIS_URL")  # $(VAR) needs it defined first
    assert variables["MCP_CLASSIFIER_REDIS_URL"]["value"] == "rediss://:$(REDIS_PASSWORD)@cache.example.internal:6380/0"
    assert not find(rendered["external-redis"], "Deployment", "-redis")
    assert not find(rendered["external-redis"], "Secret", "-redis")


def redis_config_files(container: dict[str, Any]) -> str:
    """The script that starts redis-server (sh -c): it writes the config file the password goes in."""
    assert container["command"] == ["/bin/sh", "-c"]
    return container["args"][0]


@pytest.mark.parametrize("profile", ["default", "production"])
def test_the_charts_redis_has_a_password_from_a_secret_and_never_on_its_command_line(
    rendered: dict[str, list[dict[str, Any]]], profile: str
) -> None:
    docs = rendered[profile]
    wanted = values_of(profile)["redis"]["auth"]
    secret_name = wanted["existingSecret"] or f"{RELEASE}-mcp-classifier-redis"
    generated = find(docs, "Secret", "-redis")
    if wanted["existingSecret"]:
        assert not generated  # the user's Secret, not one of the chart's
    else:
        (secret,) = generated
        assert len(base64.b64decode(secret["data"]["password"])) == 32
    # the gateway: the password from that Secret, into its URL
    (gw,) = gateway(docs)["spec"]["template"]["spec"]["containers"]
    variables = env_of(gw)
    assert variables["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == secret_name
    assert variables["MCP_CLASSIFIER_REDIS_URL"]["value"] == f"redis://:$(REDIS_PASSWORD)@{RELEASE}-mcp-classifier-redis:6379/0"
    # Redis: the Secret mounted as a file, the password written into a config file at start; no --requirepass, no env,
    # no --protected-mode no
    spec = one(docs, "Deployment", "-redis")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert "env" not in container and "envFrom" not in container
    flat = json.dumps(container["args"][1:])
    assert "requirepass" not in flat and "protected-mode" not in flat and "PASSWORD" not in flat
    assert "requirepass" in redis_config_files(container) and "/etc/redis/auth/password" in redis_config_files(container)
    (auth,) = [v for v in spec["volumes"] if v["name"] == "auth"]
    assert auth["secret"]["secretName"] == secret_name
    assert {m["mountPath"]: m.get("readOnly", False) for m in container["volumeMounts"]}["/etc/redis/auth"] is True
    assert "/etc/redis/auth/password" in json.dumps(container["readinessProbe"])
    assert spec["securityContext"]["runAsNonRoot"] is True and container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_charts_redis_is_a_patched_7_4_pinned_by_digest(rendered: dict[str, list[dict[str, Any]]]) -> None:
    image = one(rendered["default"], "Deployment", "-redis")["spec"]["template"]["spec"]["containers"][0]["image"]
    match = re.fullmatch(r"docker\.io/library/redis:7\.4\.(\d+)-alpine@sha256:[0-9a-f]{64}", image)
    assert match and int(match.group(1)) >= 9, image  # 7.4.2 predates the Lua and HyperLogLog CVE fixes of 7.4.6-7.4.9


# ---- OpenTelemetry, categories ----------------------------------------------------------------------
def test_one_otel_block_sets_the_otel_variables_of_every_pod_running_our_code(rendered: dict[str, list[dict[str, Any]]]) -> None:
    endpoint = values_of("production")["otel"]["endpoint"]
    for name, spec in pod_specs(rendered["production"]).items():
        if "-redis" in name:
            continue
        env = env_of(spec["containers"][0])
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"]["value"] == endpoint, name
        assert env["OTEL_TRACES_SAMPLER_ARG"]["value"] == "0.1"
        assert "deployment.environment=production" in env["OTEL_RESOURCE_ATTRIBUTES"]["value"]
    services = {
        env_of(s["containers"][0])["OTEL_SERVICE_NAME"]["value"] for n, s in pod_specs(rendered["production"]).items() if "-redis" not in n
    }
    assert {"mcp-classifier-gateway", "mcp-classifier-embedder"} <= services
    for spec in pod_specs(rendered["default"]).values():
        assert not [n for n in env_of(spec["containers"][0]) if n.startswith("OTEL_")]


def test_the_categories_configmap_is_a_valid_categories_file_mounted_where_serve_config_points(
    rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    docs = rendered["production"]
    cm = one(docs, "ConfigMap", "-categories")
    path = tmp_path / "categories.yaml"
    path.write_text(cm["data"]["categories.yaml"])
    assert load_categories(path).names == ["math", "coding", "general"]
    assert serve_config_v2(docs)["applications"][0]["args"]["settings"]["categories_file"] == CATEGORIES_FILE
    head, workers = ray_groups(docs)
    for group in [head, *workers]:
        spec = group["template"]["spec"]
        (volume,) = [v for v in spec["volumes"] if v.get("configMap")]
        assert volume["configMap"]["name"] == cm["metadata"]["name"]
        (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
        assert f"{mount['mountPath']}/{volume['configMap']['items'][0]['path']}" == CATEGORIES_FILE
        assert "annotations" not in group["template"]["metadata"]  # no checksum: an edit must not replace the cluster
    # without categories the packaged default is used: no ConfigMap, no mount, no categories_file
    assert not find(rendered["default"], "ConfigMap", "-categories")
    assert "categories_file" not in serve_config_v2(rendered["default"])["applications"][0]["args"]["settings"]


# ---- named classifiers (classifiers) -------------------------------------------------------------------
PORT_NAME = re.compile(r"^(?=.*[a-z])(?!.*--)[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$")  # IANA_SVC_NAME, as Kubernetes checks it


def classifier_pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The pods that read the classifiers' files: the gateway (their names) and the Ray pods (the replicas classify)."""
    return {name: spec for name, spec in pod_specs(docs).items() if name.endswith("-gateway") or name.startswith("ray-")}


def test_named_classifiers_are_mounted_in_every_pod_that_reads_them_where_the_settings_point(
    rendered: dict[str, list[dict[str, Any]]], tmp_path: Path
) -> None:
    docs = rendered["cpu-only"]  # complexity and prompt_guard, inline
    cm = one(docs, "ConfigMap", "-classifiers")
    assert set(cm["data"]) == {"complexity.yaml", "prompt_guard.yaml"}
    for key, labels in (("complexity.yaml", ["simple", "complex"]), ("prompt_guard.yaml", ["benign", "jailbreak"])):
        path = tmp_path / key
        path.write_text(cm["data"][key])
        assert load_categories(path).names == labels
    files = {name: f"{CLASSIFIERS_DIR}/{name}.yaml" for name in ("complexity", "prompt_guard")}
    assert serve_config_v2(docs)["applications"][0]["args"]["settings"]["classifiers"] == files
    env = one(docs, "ConfigMap", "-gateway")["data"]
    assert env["MCP_CLASSIFIER_CLASSIFIERS"] == ",".join(f"{name}={file}" for name, file in files.items())
    items = [{"key": f"{name}.yaml", "path": f"{name}.yaml"} for name in files]
    inline = [{"configMap": {"name": cm["metadata"]["name"], "items": items}}]
    # from a ConfigMap of yours: its key, projected under the classifier's name; no ConfigMap of the chart's
    theirs = rendered["external-redis"]
    assert not find(theirs, "ConfigMap", "-classifiers")
    assert serve_config_v2(theirs)["applications"][0]["args"]["settings"]["classifiers"] == {"prompt_guard": files["prompt_guard"]}
    mapped = [{"configMap": {"name": "router-classifiers", "items": [{"key": "prompt_guard.yaml", "path": "prompt_guard.yaml"}]}}]
    for profile, sources in (("cpu-only", inline), ("external-redis", mapped)):
        pods = classifier_pods(rendered[profile])
        assert set(pods) == {
            f"{RELEASE}-mcp-classifier-gateway",
            "ray-head",
            f"ray-{values_of(profile)['embedder']['workers']['groupName']}",
        }
        for name, spec in pods.items():
            (volume,) = [v for v in spec["volumes"] if v["name"] == "classifiers"]
            assert volume["projected"]["sources"] == sources, (profile, name)
            (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "classifiers"]
            assert mount == {"name": "classifiers", "mountPath": CLASSIFIERS_DIR, "readOnly": True}, (profile, name)
    # none: no ConfigMap, no volume, no setting
    default = rendered["default"]
    assert not find(default, "ConfigMap", "-classifiers")
    assert "classifiers" not in serve_config_v2(default)["applications"][0]["args"]["settings"]
    assert not {"MCP_CLASSIFIER_CLASSIFIERS", "MCP_CLASSIFIER_CLASSIFY_PORTS"} & set(one(default, "ConfigMap", "-gateway")["data"])
    for name, spec in classifier_pods(default).items():
        assert "classifiers" not in [v["name"] for v in spec.get("volumes", [])], name


def test_each_classifier_port_is_a_gateway_setting_a_container_port_and_a_named_service_port(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["cpu-only"]
    env = one(docs, "ConfigMap", "-gateway")["data"]
    assert env["MCP_CLASSIFIER_CLASSIFY_PORTS"] == "complexity=8081,prompt_guard=8082"
    settings = Settings(classifiers=env["MCP_CLASSIFIER_CLASSIFIERS"], classify_ports=env["MCP_CLASSIFIER_CLASSIFY_PORTS"])
    assert settings.serving.classify_ports == {"complexity": 8081, "prompt_guard": 8082}
    (container,) = gateway(docs)["spec"]["template"]["spec"]["containers"]
    assert [p for p in container["ports"] if p["name"] != "http"] == [
        {"name": "complexity", "containerPort": 8081, "protocol": "TCP"},
        {"name": "prompt-guard", "containerPort": 8082, "protocol": "TCP"},
    ]
    ports = one(docs, "Service", "-gateway")["spec"]["ports"]
    assert ports[1:] == [
        {"name": "complexity", "port": 8081, "targetPort": "complexity", "protocol": "TCP", "appProtocol": "http"},
        {"name": "prompt-guard", "port": 8082, "targetPort": "prompt-guard", "protocol": "TCP", "appProtocol": "http"},
    ]
    assert all(PORT_NAME.match(p["name"]) for p in ports)


def test_a_classifier_without_a_port_is_served_by_name_only_and_a_port_name_can_be_chosen(helm: list[str], tmp_path: Path) -> None:
    topics = {"categories": [{"name": "a", "examples": ["one"]}, {"name": "b", "examples": ["two"]}]}  # the file as a map
    docs = render(
        helm,
        tmp_path,
        {"classifiers": {"topics": {"file": topics}, "prompt_guard": {"configMap": {"name": "c"}, "port": 9001, "portName": "guard"}}},
    )
    env = one(docs, "ConfigMap", "-gateway")["data"]
    assert env["MCP_CLASSIFIER_CLASSIFY_PORTS"] == "prompt_guard=9001"
    assert [p["name"] for p in one(docs, "Service", "-gateway")["spec"]["ports"]] == ["http", "guard"]
    assert yaml.safe_load(one(docs, "ConfigMap", "-classifiers")["data"]["topics.yaml"]) == topics
    (volume,) = [v for v in gateway(docs)["spec"]["template"]["spec"]["volumes"] if v["name"] == "classifiers"]
    assert {"key": "prompt_guard.yaml", "path": "prompt_guard.yaml"} in volume["projected"]["sources"][1]["configMap"]["items"]


@pytest.mark.parametrize(
    ("classifiers", "says"),
    [
        ({"default": {"file": "x"}}, "invalid propertyName 'default'"),
        ({"Guard": {"file": "x"}}, "invalid propertyName 'Guard'"),
        ({"g": {"file": "x", "prt": 9001}}, "additional properties 'prt' not allowed"),
        ({"g": {"file": "x", "port": 70000}}, "/classifiers/g/port"),
        ({"g": {"file": "x", "port": 9001, "portName": "Guard"}}, "/classifiers/g/portName"),
        ({"g": {"configMap": {"key": "g.yaml"}}}, "missing property 'name'"),
        ({"g": {}}, "classifiers.g: set its categories file"),
        ({"g": {"file": "x", "configMap": {"name": "m"}}}, "classifiers.g: set either file or configMap, not both"),
        ({"g": {"file": "x", "port": 8080}}, "classifiers.g.port 8080 is already taken by gateway.port"),
        (
            {"a": {"file": "x", "port": 9001}, "b": {"file": "z", "port": 9001}},
            "classifiers.b.port 9001 is already taken by classifiers.a.port",
        ),
        ({"a_long_classifier": {"file": "x", "port": 9001}}, "set classifiers.a_long_classifier.portName"),
        ({"http": {"file": "x", "port": 9001}}, 'the port name "http" is already'),
        ({"g": {"file": "x", "portName": "guard"}}, "classifiers.g.portName names a port: set classifiers.g.port too"),
    ],
)
def test_the_classifiers_value_is_refused_with_the_reason(helm: list[str], tmp_path: Path, classifiers: dict[str, Any], says: str) -> None:
    result = helm_template(helm, tmp_path, values={"classifiers": classifiers}, check=False)
    assert result.returncode != 0 and says in result.stderr, result.stderr


# ---- schema, labels, validity ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "typo, key",
    [
        ({"gateway": {"replicaCont": 2}}, "replicaCont"),
        ({"embedder": {"batchsize": 64}}, "batchsize"),
        ({"embedder": {"replicas": {"mn": 1}}}, "mn"),
        ({"networkPolicy": {"egress": {}}}, "egress"),
        ({"networkPolicy": {"router": {"namespaces": "llm-router"}}}, "namespaces"),
        ({"embedder": {"rayAuth": {"secret": "x"}}}, "secret"),
        ({"redis": {"auth": {"password": "x"}}}, "password"),
        ({"gatway": {}}, "gatway"),
    ],
)
def test_the_values_schema_rejects_a_misspelled_key(helm: list[str], tmp_path: Path, typo: dict[str, Any], key: str) -> None:
    result = helm_template(helm, tmp_path, values=typo, check=False)
    assert result.returncode != 0
    assert f"additional properties '{key}' not allowed" in result.stderr


def test_the_values_schema_is_strict_on_every_object_it_owns() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.Draft7Validator(schema).validate(yaml.safe_load((CHART / "values.yaml").read_text()))

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, f"{where} is not strict"
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    walk(schema, "#")


def test_the_values_schema_bounds_match_the_settings() -> None:
    """Enums and numeric bounds of the mapped values equal those of their Settings fields."""
    import typing

    from annotated_types import Ge, Gt, Le

    schema = json.loads((CHART / "values.schema.json").read_text())
    mapped = {
        **VALUE_FLAGS,
        **{f"gateway.config.{k}": v for k, v in GATEWAY_CONFIG_FLAGS.items()},
        **{f"gateway.toolFeedback.{k}": v for k, v in TOOL_FEEDBACK_FLAGS.items()},
    }
    assert set(GATEWAY_CONFIG_FLAGS) == set(values_of("")["gateway"]["config"])
    assert set(TOOL_FEEDBACK_FLAGS) == set(values_of("")["gateway"]["toolFeedback"])
    for dotted, flag in mapped.items():
        name = flag.removeprefix("--").replace("-", "_")
        if name in PENDING_SETTINGS:
            continue
        node = schema
        for part in dotted.split("."):
            node = node["properties"][part]
            if "$ref" in node:
                node = {**schema["definitions"][node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
        field = settings_fields()[name]
        if typing.get_origin(field.annotation) is typing.Literal:
            assert node["enum"] == list(typing.get_args(field.annotation)), dotted
        for meta in field.metadata:
            if isinstance(meta, Ge):
                assert node.get("minimum") == meta.ge, dotted
            elif isinstance(meta, Gt):
                assert node.get("exclusiveMinimum") == meta.gt, dotted
            elif isinstance(meta, Le):
                assert node.get("maximum") == meta.le, dotted


REQUIRED_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/part-of",
)


def test_labels_follow_app_kubernetes_io(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for profile, docs in rendered.items():
        for doc in docs:
            labels = doc["metadata"]["labels"]
            where = f"{profile}: {doc['kind']}/{doc['metadata']['name']}"
            assert all(labels.get(k) for k in REQUIRED_LABELS), where
            assert labels["app.kubernetes.io/name"] == "mcp-classifier" and labels["app.kubernetes.io/instance"] == RELEASE, where
            assert labels["app.kubernetes.io/managed-by"] == "Helm", where
        for name, spec_owner in [(d["metadata"]["name"], d) for d in docs if d["kind"] == "Deployment"]:
            selector = spec_owner["spec"]["selector"]["matchLabels"]
            assert set(selector) == {"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component"}, name
            assert selector.items() <= spec_owner["spec"]["template"]["metadata"]["labels"].items(), name
        for svc in find(docs, "Service"):
            assert set(svc["spec"]["selector"]) == {"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component"}
        head, workers = ray_groups(docs)
        for group in [head, *workers]:
            assert group["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "embedder"


def test_every_rendered_object_is_valid(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """Built-in kinds against Kubernetes' schemas (strict); the RayService against the project's schema."""
    import kubernetes_validate

    schema = json.loads((REPO_ROOT / "helm" / "rayservice-schema.json").read_text())
    rayservice = jsonschema.Draft7Validator(schema)
    serve = jsonschema.Draft7Validator({"$ref": "#/definitions/serveConfig", "definitions": schema["definitions"]})
    for docs in rendered.values():
        for doc in docs:
            if doc["kind"] == "RayService":
                rayservice.validate(doc)
                serve.validate(yaml.safe_load(doc["spec"]["serveConfigV2"]))
                head, workers = ray_groups(docs)
                for group in [head, *workers]:
                    kubernetes_validate.validate(
                        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"}, "template": group["template"]},
                        KUBE_VERSION,
                        strict=True,
                    )
            elif doc["kind"] == "LocustTest":
                jsonschema.Draft7Validator(json.loads(LOCUST_SCHEMA.read_text())).validate(doc)
            elif doc["kind"] == "ServiceMonitor":
                assert doc["apiVersion"] == "monitoring.coreos.com/v1"
                assert doc["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}]
            elif doc["kind"] in ("PodMonitor", "PrometheusRule"):
                assert doc["apiVersion"] == "monitoring.coreos.com/v1"  # their CRDs check them: test_chart_crds.py
            else:
                kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_the_rayservice_schema_rejects_a_misspelled_field(rendered: dict[str, list[dict[str, Any]]]) -> None:
    schema = json.loads((REPO_ROOT / "helm" / "rayservice-schema.json").read_text())
    doc = json.loads(json.dumps(one(rendered["default"], "RayService")))
    doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["maxReplica"] = 3
    with pytest.raises(jsonschema.ValidationError, match="maxReplica"):
        jsonschema.validate(doc, schema)
    doc = json.loads(json.dumps(one(rendered["default"], "RayService")))
    doc["spec"]["rayClusterConfig"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = "2"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def test_the_helm_test_pod_calls_health_and_classify_text(rendered: dict[str, list[dict[str, Any]]]) -> None:
    pod = one(rendered["production"], "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = pod["spec"]["containers"]
    script = container["args"][0]
    compile(script, "helm-test", "exec")
    assert '"/health"' in script and '"/mcp/tools/call"' in script and '"classify_text"' in script
    assert env_of(container)["GATEWAY_URL"]["value"] == f"http://{RELEASE}-mcp-classifier-gateway:8080"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_chart_app_version_is_the_package_version() -> None:
    import tomllib

    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == project["version"]


def gateway_settings(docs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The Settings the gateway container loads: the ConfigMaps its envFrom names, then its env, expanded as
    Kubernetes would, and no MCP_CLASSIFIER_* variable of the test's own environment."""
    for name in list(os.environ):
        if name.startswith(ENV_PREFIX):
            monkeypatch.delenv(name)
    (container,) = gateway(docs)["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(one(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
    resolved = {"REDIS_PASSWORD": "s3cret"}
    for var in container["env"]:
        if "value" in var:
            resolved[var["name"]] = re.sub(r"\$\((\w+)\)", lambda m: resolved.get(m.group(1), m.group(0)), var["value"])
    env.update({k: v for k, v in resolved.items() if k.startswith(ENV_PREFIX)})
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings()


@pytest.mark.parametrize("profile", PROFILES)
def test_the_gateway_environment_is_valid_settings(
    rendered: dict[str, list[dict[str, Any]]], profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway's ConfigMap and env, as Kubernetes would expand them, load into Settings without error."""
    docs = rendered[profile]
    settings = gateway_settings(docs, monkeypatch)
    assert (
        settings.serving.backend
        == f"grpc://{one(docs, 'RayService')['metadata']['name']}-serve-svc:{values_of(profile)['serve']['grpcPort']}"
    )
    assert settings.serving.host == "0.0.0.0" and settings.batching.batch_size == values_of(profile)["embedder"]["batchSize"]
    if "redis_url" in settings_fields():
        url = settings.cache.redis_url.get_secret_value()
        assert url.startswith("redis") and "s3cret" in url  # the chart's Redis has a password too


# ---- tool filter: feedback from use -------------------------------------------------------------
def test_tool_feedback_values_reach_the_gateway_settings(helm: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each gateway.toolFeedback value, none of them its default, is what the gateway's settings read."""
    values = {"enabled": True, "maxVectors": 25, "ttlS": 86400, "refreshS": 0.5, "weight": 0.2}
    docs = render(helm, tmp_path, {"gateway": {"toolFeedback": values}})
    tools = gateway_settings(docs, monkeypatch).toolfilter
    got = {"enabled": tools.tool_feedback, "maxVectors": tools.tool_feedback_max_vectors, "ttlS": tools.tool_feedback_ttl_s}
    got |= {"refreshS": tools.tool_feedback_refresh_s, "weight": tools.tool_feedback_weight}
    assert got == values
    assert set(values) == set(TOOL_FEEDBACK_FLAGS)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_renders_tool_feedback_off_with_the_settings_defaults(
    rendered: dict[str, list[dict[str, Any]]], profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Feedback keeps vectors of users' requests: no profile turns it on, and the chart's defaults are the settings'."""
    assert one(rendered[profile], "ConfigMap", "-gateway")["data"]["MCP_CLASSIFIER_TOOL_FEEDBACK"] == "false"
    tools = gateway_settings(rendered[profile], monkeypatch).toolfilter
    defaults = ToolFilterSettings()
    names = [flag.removeprefix("--").replace("-", "_") for flag in TOOL_FEEDBACK_FLAGS.values()]
    assert tools.tool_feedback is False
    assert {n: getattr(tools, n) for n in names} == {n: getattr(defaults, n) for n in names}


def test_the_values_schema_refuses_tool_feedback_values_the_settings_refuse(helm: list[str], tmp_path: Path) -> None:
    for bad in ({"weight": 1.5}, {"maxVectors": 0}, {"refreshS": -1}, {"ttlS": 0}, {"enabled": "yes"}):
        result = helm_template(helm, tmp_path, values={"gateway": {"toolFeedback": bad}}, check=False)
        assert result.returncode != 0 and f"/gateway/toolFeedback/{next(iter(bad))}" in result.stderr, bad


@pytest.mark.parametrize("enabled", [True, False])
def test_direct_ingress_reaches_every_ray_container_the_gateway_and_its_network_policy(
    helm: list[str], tmp_path: Path, enabled: bool
) -> None:
    """Serve's replicas open their own gRPC ports in the range the NetworkPolicy opens; the gateway learns them
    from the Serve REST API on the head, at the dashboard port the head really listens on."""
    policy = {"enabled": True, "kuberayOperator": {"namespace": "kuberay-system"}}
    docs = render(helm, tmp_path, {"embedder": {"directIngress": {"enabled": enabled}}, "networkPolicy": policy})
    head, workers = ray_groups(docs)
    containers = [c for group in (head, *workers) for c in group["template"]["spec"]["containers"]]
    refresh_s = values_of("")["embedder"]["directIngress"]["refreshS"]
    for container in containers:
        env = {name: var["value"] for name, var in env_of(container).items() if "value" in var}
        assert env["RAY_SERVE_ENABLE_DIRECT_INGRESS"] == ("1" if enabled else "0")
        ports = (env.get("RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT"), env.get("RAY_SERVE_DIRECT_INGRESS_MAX_GRPC_PORT"))
        assert ports == (("40000", "41000") if enabled else (None, None))
        assert env.get("RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S") == (f"{2 * refresh_s:g}" if enabled else None)
    config = one(docs, "ConfigMap", "-gateway")["data"]
    assert config["MCP_CLASSIFIER_RAY_DIRECT_INGRESS"] == str(enabled).lower()
    rules = one(docs, "NetworkPolicy", "-gateway")["spec"]["egress"]
    opened = [p for rule in rules for p in rule["ports"] if rule.get("to") == EMBEDDER_RULE["to"]]
    if enabled:
        head_ports = {p["name"]: p["containerPort"] for p in head["template"]["spec"]["containers"][0]["ports"]}
        assert head["rayStartParams"]["dashboard-port"] == str(head_ports["dashboard"])
        service = f"{one(docs, 'RayService')['metadata']['name']}-head-svc.{NAMESPACE}.svc"
        assert config["MCP_CLASSIFIER_RAY_SERVE_API_URL"] == f"http://{service}:{head_ports['dashboard']}"
        assert opened == EMBEDDER_RULE["ports"]
    else:
        assert "MCP_CLASSIFIER_RAY_SERVE_API_URL" not in config and opened == [{"port": 9000, "protocol": "TCP"}]
    assert values_of("")["embedder"]["directIngress"]["enabled"] is settings_fields()["ray_direct_ingress"].default
    assert refresh_s == settings_fields()["replica_refresh_s"].default


@pytest.mark.parametrize("enabled", [True, False])
def test_every_ray_container_gets_the_throughput_optimized_switch(helm: list[str], tmp_path: Path, enabled: bool) -> None:
    """RAY_SERVE_THROUGHPUT_OPTIMIZED is read by each Ray process at start: head and every worker group carry it."""
    docs = render(helm, tmp_path, {"embedder": {"throughputOptimized": enabled}})
    head, workers = ray_groups(docs)
    containers = [c for group in (head, *workers) for c in group["template"]["spec"]["containers"]]
    assert containers and all(env_of(c)["RAY_SERVE_THROUGHPUT_OPTIMIZED"]["value"] == ("1" if enabled else "0") for c in containers)
    assert values_of("")["embedder"]["throughputOptimized"] is settings_fields()["ray_throughput_optimized"].default


# ---- gateway workers ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("gateway_values", "workers"),
    [
        ({}, "1"),  # the default request, 250m: one process
        ({"resources": {"requests": {"cpu": "1500m"}}}, "2"),  # rounded up
        ({"resources": {"requests": {"cpu": "4"}}}, "4"),
        ({"resources": {"requests": {"cpu": 32}}}, "8"),  # capped by maxWorkers
        ({"resources": {"requests": {"cpu": 32}}, "maxWorkers": 16}, "16"),
        ({"workers": 3}, "3"),  # set outright
    ],
)
def test_the_worker_count_follows_the_gateway_cpu_request(
    helm: list[str], tmp_path: Path, gateway_values: dict[str, Any], workers: str
) -> None:
    docs = render(helm, tmp_path, values={"gateway": gateway_values})
    assert one(docs, "ConfigMap", "-gateway")["data"]["MCP_CLASSIFIER_WORKERS"] == workers
