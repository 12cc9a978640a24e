"""What the production profile adds for a platform team's review, read from the real helm's renders.

No single point of failure (GCS fault tolerance, the Ray pods' PodDisruptionBudgets and spread), deterministic model
delivery (a pinned revision; baked, on a volume, or from the hub), edits that do not replace the GPU cluster, the
supply chain (digests, no `latest`), least privilege (the Ray pods' ServiceAccount and tokens) and scale (the gateway's
PDB and spread, gRPC connection age, the PodMonitor and PrometheusRule). The custom resources are checked against the
operators' CRDs in test_chart_crds.py, who reaches which port in test_chart_network.py.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_classifier.settings import settings_fields
from tests.integration.test_helm_chart import (
    KUBE_VERSION,
    NAMESPACE,
    RELEASE,
    env_of,
    find,
    gateway,
    gateway_series,
    helm_template,
    one,
    ray_groups,
    render,
    serve_config_v2,
    values_of,
)
from tests.integration.test_helm_chart import helm as helm  # the helm binary fixture, re-exported for this module's tests
from tests.integration.test_helm_chart import rendered as rendered  # every ci/ profile, rendered once per session
from tests.support import REPO_ROOT

RAY_SA = f"{RELEASE}-mcp-classifier-ray"
GCS_REDIS = f"{RELEASE}-mcp-classifier-redis-gcs"
QWEN_REVISION = "97b0c614be4d77ee51c0cef4e5f07c00f9eb65b3"
HF_HOME = "/home/ray/.cache/huggingface"


def ray_templates(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    head, workers = ray_groups(docs)
    return {"head": head["template"], **{w["groupName"]: w["template"] for w in workers}}


def worker_template(docs: list[dict[str, Any]]) -> dict[str, Any]:
    _, (group,) = ray_groups(docs)
    return group["template"]


def mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["mountPath"]: m for m in container.get("volumeMounts", [])}


def volumes(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in spec.get("volumes", [])}


def validate_pod_template(template: dict[str, Any]) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"}, "template": template}, KUBE_VERSION, strict=True
    )


# ---- 1. no single point of failure -------------------------------------------------------------------
def test_production_keeps_the_gcs_state_in_a_redis_of_its_own_not_the_cache(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["production"]
    options = one(docs, "RayService")["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"]
    assert options == {
        "redisAddress": f"{GCS_REDIS}:6379",
        "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "mcp-classifier-gcs-redis", "key": "password"}}},
    }
    # the GCS's Redis: no eviction, an append-only file on a claim; the cache's Redis stays an LRU cache
    spec = one(docs, "Deployment", "-redis-gcs")["spec"]["template"]["spec"]
    args = spec["containers"][0]["args"][1:]
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction" and args[args.index("--appendonly") + 1] == "yes"
    assert volumes(spec)["data"]["persistentVolumeClaim"]["claimName"] == GCS_REDIS
    assert one(docs, "PersistentVolumeClaim")["metadata"]["name"] == GCS_REDIS
    assert volumes(spec)["auth"]["secret"]["secretName"] == "mcp-classifier-gcs-redis"
    cache = one(docs, "Deployment", "-redis")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert cache[cache.index("--maxmemory-policy") + 1] == "allkeys-lru"
    assert one(docs, "Service", "-redis-gcs")["spec"]["ports"] == [
        {"name": "redis", "port": 6379, "targetPort": "redis", "protocol": "TCP"}
    ]
    # off by default: no options, no second Redis
    default = rendered["default"]
    assert "gcsFaultToleranceOptions" not in one(default, "RayService")["spec"]["rayClusterConfig"]
    assert not find(default, "Deployment", "-redis-gcs") and not find(default, "PersistentVolumeClaim")


def test_gcs_fault_tolerance_takes_your_own_redis_or_generates_a_password_for_the_charts(helm: list[str], tmp_path: Path) -> None:
    own = {
        "enabled": True,
        "externalAddress": "redis-ha.platform.svc:6379",
        "existingSecret": "redis-ha",
        "externalStorageNamespace": "mcp",
    }
    docs = render(helm, tmp_path, {"embedder": {"gcsFaultTolerance": own}})
    assert one(docs, "RayService")["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"] == {
        "redisAddress": "redis-ha.platform.svc:6379",
        "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "redis-ha", "key": "password"}}},
        "externalStorageNamespace": "mcp",
    }
    assert not find(docs, "Deployment", "-redis-gcs") and not find(docs, "Secret", "-redis-gcs")
    # the chart's Redis without an existing Secret: a generated password, the same Secret for Redis and KubeRay
    docs = render(helm, tmp_path, {"embedder": {"gcsFaultTolerance": {"enabled": True}}})
    (secret,) = find(docs, "Secret", "-redis-gcs")
    assert len(base64.b64decode(secret["data"]["password"])) == 32
    ref = one(docs, "RayService")["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"]["redisPassword"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": GCS_REDIS, "key": "password"}
    spec = one(docs, "Deployment", "-redis-gcs")["spec"]["template"]["spec"]
    assert volumes(spec)["auth"]["secret"]["secretName"] == GCS_REDIS
    (container,) = spec["containers"]
    assert "requirepass" not in json.dumps(container["args"][1:]) and "env" not in container


def test_production_guards_the_ray_head_and_workers_with_disruption_budgets(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["production"]
    selector = ray_templates(docs)["head"]["metadata"]["labels"]
    embedder = {k: selector[k] for k in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component")}
    head = one(docs, "PodDisruptionBudget", "-embedder-head")["spec"]
    assert head["maxUnavailable"] == 0 and head["selector"]["matchLabels"] == {**embedder, "ray.io/node-type": "head"}
    workers = one(docs, "PodDisruptionBudget", "-embedder-workers")["spec"]
    assert workers["maxUnavailable"] == 1 and workers["selector"]["matchLabels"] == {**embedder, "ray.io/node-type": "worker"}
    assert not find(rendered["default"], "PodDisruptionBudget")


def test_production_spreads_the_gpu_workers_over_nodes_and_zones(rendered: dict[str, list[dict[str, Any]]]) -> None:
    spreads = worker_template(rendered["production"])["spec"]["topologySpreadConstraints"]
    assert [(s["topologyKey"], s["whenUnsatisfiable"]) for s in spreads] == [
        ("kubernetes.io/hostname", "DoNotSchedule"),
        ("topology.kubernetes.io/zone", "ScheduleAnyway"),
    ]
    labels = worker_template(rendered["production"])["metadata"]["labels"]
    for spread in spreads:
        assert spread["labelSelector"]["matchLabels"]["ray.io/node-type"] == "worker"
        assert spread["labelSelector"]["matchLabels"].items() - {("ray.io/node-type", "worker")} <= labels.items()
        # one cluster at a time: the old cluster of an upgrade must not block the new one's workers
        assert spread["matchLabelKeys"] == ["ray.io/cluster"]
    default = worker_template(rendered["default"])["spec"]["topologySpreadConstraints"]
    assert [(s["topologyKey"], s["whenUnsatisfiable"]) for s in default] == [("kubernetes.io/hostname", "ScheduleAnyway")]


# ---- 2. deterministic, offline-capable model delivery ----------------------------------------------------
def test_the_model_revision_reaches_every_replica_through_the_serve_config(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for profile in ("default", "production"):
        settings = serve_config_v2(rendered[profile])["applications"][0]["args"]["settings"]
        assert settings["model"] == "Qwen/Qwen3-Embedding-0.6B" and settings["model_revision"] == QWEN_REVISION
    assert "model_revision" not in serve_config_v2(rendered["cpu-only"])["applications"][0]["args"]["settings"]


def test_hub_delivery_downloads_into_a_cache_that_requests_ephemeral_storage(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["default"]
    size = values_of("default")["embedder"]["modelCacheSizeLimit"]
    spec = worker_template(docs)["spec"]
    (container,) = spec["containers"]
    assert volumes(spec)["model-cache"]["emptyDir"] == {"sizeLimit": size}
    assert mounts(container)[HF_HOME]["name"] == "model-cache"
    assert container["resources"]["requests"]["ephemeral-storage"] == size
    assert "HF_HUB_OFFLINE" not in env_of(container)
    # the head runs no replica: no download cache there
    head = ray_templates(docs)["head"]["spec"]
    assert "model-cache" not in volumes(head) and HF_HOME not in mounts(head["containers"][0])


def test_image_delivery_reads_the_baked_weights_offline_and_hides_nothing(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for profile in ("production", "cpu-only"):
        docs = rendered[profile]
        baked = values_of(profile)["embedder"]["modelDelivery"]["imagePath"]
        for name, template in ray_templates(docs).items():
            spec = template["spec"]
            (container,) = spec["containers"]
            env = env_of(container)
            assert env["HF_HUB_OFFLINE"]["value"] == "1" and env["HF_HUB_CACHE"]["value"] == baked, (profile, name)
            # no volume over the image's files: neither over the baked cache nor over HF_HOME
            assert not {p for p in mounts(container) if p == baked or p.startswith(HF_HOME) or baked.startswith(p)}, (profile, name)
            assert "model-cache" not in volumes(spec) and "ephemeral-storage" not in container["resources"].get("requests", {})


@pytest.mark.parametrize(
    "volume",
    [
        {"persistentVolumeClaim": {"claimName": "models", "readOnly": True}},
        {"image": {"reference": "registry.example/models/qwen3-embedding:0.6b", "pullPolicy": "IfNotPresent"}},
    ],
    ids=["pvc", "image-volume"],
)
def test_volume_delivery_mounts_a_hub_cache_read_only_where_the_loader_looks(
    helm: list[str], tmp_path: Path, volume: dict[str, Any]
) -> None:
    docs = render(helm, tmp_path, {"embedder": {"modelDelivery": {"mode": "volume", "volume": volume, "mountPath": "/models"}}})
    template = worker_template(docs)
    (container,) = template["spec"]["containers"]
    assert volumes(template["spec"])["model-store"] == {"name": "model-store", **volume}
    assert mounts(container)["/models"] == {"name": "model-store", "mountPath": "/models", "readOnly": True}
    env = env_of(container)
    assert env["HF_HUB_CACHE"]["value"] == "/models" and env["HF_HUB_OFFLINE"]["value"] == "1"
    validate_pod_template(template)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"embedder": {"modelRevision": ""}}, "pin embedder.modelRevision to a 40-hex commit"),
        ({"embedder": {"modelRevision": "main"}}, "pin embedder.modelRevision to a 40-hex commit"),
        ({"embedder": {"model": "builtin:minilm", "modelDelivery": {"mode": "image"}}}, "embedder.modelRevision applies to a hub id"),
        ({"embedder": {"modelDelivery": {"mode": "volume"}}}, "needs embedder.modelDelivery.volume"),
        ({"embedder": {"upgradeStrategy": "NewClusterWithIncrementalUpgrade"}}, "needs embedder.clusterUpgradeOptions.gatewayClassName"),
        ({"embedder": {"gcsFaultTolerance": {"enabled": True, "existingSecret": "x"}}}, "set gcsRedis.auth.existingSecret"),
    ],
)
def test_rendering_refuses_an_unpinned_or_incomplete_model_and_ray_setup(
    helm: list[str], tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    result = helm_template(helm, tmp_path, values=values, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr
    # a branch is fine where the weights are already here (baked or on a volume): the snapshot is what it is
    assert helm_template(helm, tmp_path, values={"embedder": {"modelRevision": "main", "modelDelivery": {"mode": "image"}}}).returncode == 0


# ---- 3. edits that do not replace the GPU cluster ---------------------------------------------------------
def test_a_categories_edit_changes_no_field_of_the_rayservice(helm: list[str], tmp_path: Path) -> None:
    """The replicas re-read their mounted file (hot reload); a changed pod template would roll a whole new GPU cluster."""
    production = yaml.safe_load((REPO_ROOT / "helm" / "mcp-classifier" / "ci" / "production-values.yaml").read_text())
    edited = production["categories"]["content"].replace("what's the capital of Australia", "what's the capital of Canada")
    assert edited != production["categories"]["content"]
    before = render(helm, tmp_path, profile="production")
    after = render(helm, tmp_path, {"categories": {"content": edited}}, profile="production")
    assert one(before, "ConfigMap", "-categories")["data"] != one(after, "ConfigMap", "-categories")["data"]  # the edit is there
    for name, template in ray_templates(before).items():
        assert template == ray_templates(after)[name], f"a categories edit changed the {name} pod template"
    assert one(before, "RayService") == one(after, "RayService")


def test_a_classifier_edit_changes_no_pod_template_nor_checksum(helm: list[str], tmp_path: Path) -> None:
    """A named classifier's file is a hot reload too: neither the RayService nor the gateway's pods change with it."""
    complexity = values_of("cpu-only")["classifiers"]["complexity"]["file"]
    edited = complexity.replace("who wrote Hamlet", "who wrote Faust")
    assert edited != complexity
    before = render(helm, tmp_path, profile="cpu-only")
    after = render(helm, tmp_path, {"classifiers": {"complexity": {"file": edited}}}, profile="cpu-only")
    assert one(before, "ConfigMap", "-classifiers")["data"] != one(after, "ConfigMap", "-classifiers")["data"]  # the edit is there
    assert one(before, "RayService") == one(after, "RayService")
    assert gateway(before) == gateway(after), "the gateway's checksum/config and pod template"
    for name, template in ray_templates(before).items():
        assert "annotations" not in template["metadata"], name


def test_the_incremental_upgrade_takes_its_options_from_values(helm: list[str], tmp_path: Path) -> None:
    options = {"gatewayClassName": "istio", "stepSizePercent": 20, "intervalSeconds": 30, "maxSurgePercent": 50}
    docs = render(helm, tmp_path, {"embedder": {"upgradeStrategy": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": options}})
    assert one(docs, "RayService")["spec"]["upgradeStrategy"] == {
        "type": "NewClusterWithIncrementalUpgrade",
        "clusterUpgradeOptions": options,
    }
    default = render(helm, tmp_path)
    assert one(default, "RayService")["spec"]["upgradeStrategy"] == {"type": "NewCluster"}


# ---- 4. supply chain --------------------------------------------------------------------------------------
def test_an_image_digest_wins_over_the_tag_and_latest_is_refused(helm: list[str], tmp_path: Path) -> None:
    digest = "sha256:" + "ab" * 32
    docs = render(helm, tmp_path, {"gateway": {"image": {"tag": "0.1.0", "digest": digest}}, "embedder": {"image": {"digest": digest}}})
    (container,) = gateway(docs)["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"ghcr.io/mcp-classifier/gateway:0.1.0@{digest}"
    assert {t["spec"]["containers"][0]["image"] for t in ray_templates(docs).values()} == {
        f"ghcr.io/mcp-classifier/embedder:0.1.0@{digest}"
    }
    for values, key in (
        ({"gateway": {"image": {"tag": "latest"}}}, "tag"),
        ({"embedder": {"image": {"tag": "latest"}}}, "tag"),
        ({"redis": {"image": {"tag": "latest"}}}, "tag"),
        ({"gateway": {"image": {"digest": "sha256:short"}}}, "digest"),
    ):
        failed = helm_template(helm, tmp_path, values=values, check=False)
        assert failed.returncode != 0 and f"/image/{key}" in failed.stderr, (values, failed.stderr)


# ---- 5. least privilege -------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["default", "production"])
def test_ray_pods_run_under_their_own_service_account_with_no_token(rendered: dict[str, list[dict[str, Any]]], profile: str) -> None:
    docs = rendered[profile]
    account = one(docs, "ServiceAccount", "-ray")
    assert account["metadata"]["name"] == RAY_SA and account["automountServiceAccountToken"] is False
    for name, template in ray_templates(docs).items():
        spec = template["spec"]
        assert spec["serviceAccountName"] == RAY_SA and spec["automountServiceAccountToken"] is False, name
        for container in spec["containers"]:
            assert "/var/run/secrets/kubernetes.io/serviceaccount" not in mounts(container), name
    # KubeRay's autoscaler sidecar, bound to the head's ServiceAccount, is the one container given a token
    cluster = one(docs, "RayService")["spec"]["rayClusterConfig"]
    (mount,) = cluster["autoscalerOptions"]["volumeMounts"]
    assert mount == {"name": "autoscaler-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}
    sources = volumes(ray_templates(docs)["head"]["spec"])[mount["name"]]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    assert "autoscaler-api-access" not in volumes(worker_template(docs)["spec"])


def test_in_production_the_gateway_holds_no_ray_token_and_cannot_reach_the_jobs_api(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["production"]
    spec = gateway(docs)["spec"]["template"]["spec"]
    assert "ray-auth" not in json.dumps(spec)
    config = one(docs, "ConfigMap", "-gateway")["data"]
    assert "MCP_CLASSIFIER_RAY_AUTH_TOKEN_FILE" not in config and "MCP_CLASSIFIER_RAY_SERVE_API_URL" not in config
    egress = one(docs, "NetworkPolicy", "-gateway")["spec"]["egress"]
    opened = {p["port"] for rule in egress for p in rule["ports"]}
    assert values_of("production")["serve"]["dashboardPort"] not in opened
    # the Ray pods still have the token (KubeRay's authOptions)
    assert one(docs, "RayService")["spec"]["rayClusterConfig"]["authOptions"]["secretName"] == "mcp-classifier-ray-auth"


# ---- 6. at scale -------------------------------------------------------------------------------------------
def test_production_spreads_the_gateway_strictly_over_nodes(rendered: dict[str, list[dict[str, Any]]]) -> None:
    spreads = gateway(rendered["production"])["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {s["topologyKey"]: s["whenUnsatisfiable"] for s in spreads} == {
        "kubernetes.io/hostname": "DoNotSchedule",
        "topology.kubernetes.io/zone": "ScheduleAnyway",
    }


def test_the_public_grpc_api_closes_old_connections_so_clients_reach_new_pods(rendered: dict[str, list[dict[str, Any]]]) -> None:
    values = values_of("production")["gateway"]["grpc"]
    config = one(rendered["production"], "ConfigMap", "-gateway")["data"]
    assert float(config["MCP_CLASSIFIER_GRPC_MAX_CONNECTION_AGE_S"]) == values["maxConnectionAgeS"] > 0
    assert float(config["MCP_CLASSIFIER_GRPC_MAX_CONNECTION_AGE_GRACE_S"]) == values["maxConnectionAgeGraceS"]
    assert values["maxConnectionAgeS"] == settings_fields()["grpc_max_connection_age_s"].default
    assert values["maxConnectionAgeGraceS"] == settings_fields()["grpc_max_connection_age_grace_s"].default
    assert "MCP_CLASSIFIER_GRPC_MAX_CONNECTION_AGE_S" not in one(rendered["default"], "ConfigMap", "-gateway")["data"]  # no gRPC API


def test_the_pod_monitor_scrapes_every_ray_pods_metrics_agent_and_the_heads_own(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["production"]
    monitor = one(docs, "PodMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    labels = ray_templates(docs)["head"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    agent, *head_only = monitor["spec"]["podMetricsEndpoints"]
    assert agent["port"] == "metrics"
    for template in ray_templates(docs).values():  # the port name exists on every Ray container
        assert "metrics" in {p["name"] for p in template["spec"]["containers"][0]["ports"]}
    assert sorted(e["portNumber"] for e in head_only) == [44217, 44227]
    for endpoint in head_only:
        (keep,) = endpoint["relabelings"]
        assert keep == {"sourceLabels": ["__meta_kubernetes_pod_label_ray_io_node_type"], "regex": "head", "action": "keep"}
    assert not find(rendered["default"], "PodMonitor")


def alerts(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    (group,) = one(docs, "PrometheusRule")["spec"]["groups"]
    return {rule["alert"]: rule for rule in group["rules"]}


def test_the_prometheus_rule_ships_the_alerts_the_docs_describe(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["production"]
    rules = alerts(docs)
    assert set(rules) == {
        "McpClassifierRedisDown",
        "McpClassifierBackendErrors",
        "McpClassifierGatewayNotReady",
        "McpClassifierNoEmbedderReplica",
    }
    job = one(docs, "Service", "-gateway")["metadata"]["name"]  # a ServiceMonitor's targets carry job=<Service name>
    for name in ("McpClassifierRedisDown", "McpClassifierBackendErrors"):
        expr = rules[name]["expr"]
        assert f'job="{job}"' in expr and f'namespace="{NAMESPACE}"' in expr, expr
        used = set(re.findall(r"\bmcp_classifier_[a-z0-9_]+", expr))
        assert used and used <= gateway_series(), used
    assert 'kind=~"backend_unavailable|backend_timeout"' in rules["McpClassifierBackendErrors"]["expr"]
    assert f'pod=~"{gateway(docs)["metadata"]["name"]}-' in rules["McpClassifierGatewayNotReady"]["expr"]
    assert all(rule["for"] == "5m" and rule["labels"]["severity"] in ("warning", "critical") for rule in rules.values())
    described = (REPO_ROOT / "docs" / "observability.md").read_text()
    assert all(name in described for name in rules), "docs/observability.md names every alert the chart ships"


def test_the_replica_alert_comes_only_with_the_pod_monitor(helm: list[str], tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"prometheusRule": {"enabled": True}})
    assert "McpClassifierNoEmbedderReplica" not in alerts(docs) and not find(docs, "PodMonitor")
