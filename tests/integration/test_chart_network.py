"""Who may reach which port: read from the NetworkPolicies the real helm renders, for every ci/ profile.

A small model of NetworkPolicy semantics (networking.k8s.io/v1) evaluates the rendered policies: a pod that no
policy selects for a direction is open in it; otherwise a connection needs a rule of a policy selecting the
target that admits the source (ingress), and, when the source is selected for egress, a rule of such a policy
that admits the target (egress). Peers are podSelector / namespaceSelector with matchLabels (the chart renders no
matchExpressions; an ipBlock matches no pod here). Namespaces carry kubernetes.io/metadata.name. The Ray pods
carry the labels of their template plus those KubeRay sets (ray.io/node-type head or worker, and others).

Also here: Ray token authentication (the RayService's authOptions and its Secret), the dashboard switch, and the
router edge (networkPolicy.router).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_helm_chart import CHART, NAMESPACE, PROFILES, RELEASE, find, gateway, helm_template, one, values_of
from tests.integration.test_helm_chart import helm as helm  # the helm binary fixture, re-exported for this module's tests

ALL_PORTS = frozenset(range(1, 65536))
NONE: frozenset[int] = frozenset()


# ---- a model of NetworkPolicy ---------------------------------------------------------------------
@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: dict[str, str] = field(default_factory=dict, hash=False)


def _matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector: {} selects everything; only matchLabels is used by the chart."""
    assert selector is not None
    assert set(selector) <= {"matchLabels"}, f"the model reads matchLabels only: {selector}"
    return selector.get("matchLabels", {}).items() <= labels.items()


def _peer_matches(peer: dict[str, Any], pod: Pod, policy_namespace: str) -> bool:
    assert set(peer) <= {"podSelector", "namespaceSelector", "ipBlock"}, peer
    if "ipBlock" in peer:
        return False  # addresses outside the cluster's pods
    if "namespaceSelector" in peer:
        if not _matches(peer["namespaceSelector"], {"kubernetes.io/metadata.name": pod.namespace}):
            return False
    elif pod.namespace != policy_namespace:
        return False  # a podSelector alone means the policy's own namespace
    return _matches(peer.get("podSelector", {}), pod.labels)


def _ports(rule: dict[str, Any]) -> frozenset[int]:
    if not rule.get("ports"):
        return ALL_PORTS
    opened: set[int] = set()
    for port in rule["ports"]:
        assert port.get("protocol", "TCP") == "TCP" or port["port"] == 53, port
        assert isinstance(port["port"], int), "named ports are not modelled"
        opened.update(range(port["port"], port.get("endPort", port["port"]) + 1))
    return frozenset(opened)


class Network:
    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
        for policy in self.policies:
            assert policy["metadata"]["namespace"] == NAMESPACE

    def _selecting(self, pod: Pod, direction: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self.policies
            if p["metadata"]["namespace"] == pod.namespace
            and direction in p["spec"].get("policyTypes", ["Ingress"])
            and _matches(p["spec"]["podSelector"], pod.labels)
        ]

    def _admitted(self, pod: Pod, other: Pod, direction: str) -> frozenset[int]:
        policies = self._selecting(pod, direction)
        if not policies:
            return ALL_PORTS
        key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        opened: set[int] = set()
        for policy in policies:
            for rule in policy["spec"].get(key) or []:
                peers = rule.get(peers_key)
                if peers is None or any(_peer_matches(peer, other, pod.namespace) for peer in peers):
                    opened |= _ports(rule)
        return frozenset(opened)

    def reach(self, source: Pod, target: Pod) -> frozenset[int]:
        """The TCP ports of `target` that `source` may open connections to."""
        return self._admitted(target, source, "Ingress") & self._admitted(source, target, "Egress")


def spans(ports: frozenset[int]) -> str:
    """'all', '-', or ports and ranges: '8080, 40000-41000'."""
    if ports == ALL_PORTS:
        return "all"
    out, ordered = [], sorted(ports)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ", ".join(out) or "-"


# ---- the pods: the release's own and a cast of outsiders ---------------------------------------------
def release_pods(docs: list[dict[str, Any]]) -> dict[str, Pod]:
    pods = {"gateway": Pod("gateway", NAMESPACE, gateway(docs)["spec"]["template"]["metadata"]["labels"])}
    for deployment in find(docs, "Deployment", "-redis"):
        pods["redis"] = Pod("redis", NAMESPACE, deployment["spec"]["template"]["metadata"]["labels"])
    for deployment in find(docs, "Deployment", "-redis-gcs"):  # the GCS's Redis (embedder.gcsFaultTolerance)
        pods["redis-gcs"] = Pod("redis-gcs", NAMESPACE, deployment["spec"]["template"]["metadata"]["labels"])
    cluster = one(docs, "RayService")["spec"]["rayClusterConfig"]
    kuberay = {"ray.io/is-ray-node": "yes", "ray.io/cluster": "rel-embedder-abcde", "app.kubernetes.io/created-by": "kuberay-operator"}
    head = cluster["headGroupSpec"]["template"]["metadata"]["labels"]
    pods["ray-head"] = Pod("ray-head", NAMESPACE, {**kuberay, **head, "ray.io/node-type": "head", "ray.io/group": "headgroup"})
    for group in cluster["workerGroupSpecs"]:
        labels = group["template"]["metadata"]["labels"]
        pods["ray-worker"] = Pod(
            "ray-worker", NAMESPACE, {**kuberay, **labels, "ray.io/node-type": "worker", "ray.io/group": group["groupName"]}
        )
    pods["helm-test"] = Pod("helm-test", NAMESPACE, one(docs, "Pod")["metadata"]["labels"])
    for locust in find(docs, "LocustTest"):
        # the operator labels its pods with master.labels / worker.labels and its own locust.io/* labels
        name = locust["metadata"]["name"]
        for role in ("master", "worker"):
            own = {"locust.io/test-run": name, "locust.io/component": role}
            pods[f"locust-{role}"] = Pod(f"locust-{role}", NAMESPACE, {**locust["spec"][role].get("labels", {}), **own})
    return pods


OUTSIDERS = {
    "router": Pod("router", "llm-router", {"app.kubernetes.io/name": "semantic-router"}),
    "prometheus": Pod("prometheus", "monitoring", {"app.kubernetes.io/name": "prometheus"}),
    "monitoring-other": Pod("monitoring-other", "monitoring", {"app": "grafana"}),
    "kuberay-operator": Pod("kuberay-operator", "kuberay-system", {"app.kubernetes.io/name": "kuberay-operator"}),
    "kuberay-operator-elsewhere": Pod("kuberay-operator-elsewhere", "default", {"app.kubernetes.io/name": "kuberay-operator"}),
    "neighbour": Pod("neighbour", NAMESPACE, {"app": "something-else"}),
    "stranger": Pod("stranger", "default", {"app": "something-else"}),
}
TARGETS = ("gateway", "redis", "ray-head", "ray-worker", "redis-gcs")


def operator_pod(values: dict[str, Any]) -> Pod:
    """A KubeRay operator pod where a profile's values say it runs."""
    operator = values["networkPolicy"]["kuberayOperator"]
    return Pod("operator", operator["namespace"], {**operator["podLabels"], "pod-template-hash": "x"})


def reach_table(docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """source -> target -> reachable ports, for every pod of the release and every outsider."""
    pods = release_pods(docs)
    net = Network(docs)
    sources = {**pods, **OUTSIDERS}
    return {s: {t: spans(net.reach(sources[s], pods[t])) for t in TARGETS if t in pods} for s in sources}


@pytest.fixture(scope="module")
def rendered(helm: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Every ci/ profile, rendered once for this module."""
    tmp = tmp_path_factory.mktemp("network-renders")
    out = {}
    for profile in PROFILES:
        docs = yaml.safe_load_all(helm_template(helm, tmp, values_files=[CHART / "ci" / f"{profile}-values.yaml"]).stdout)
        out[profile] = [d for d in docs if d]
    return out


def render(helm: list[str], tmp_path: Path, values: dict[str, Any], profile: str | None = "production") -> list[dict[str, Any]]:
    """One render: a ci/ profile (None: the chart's defaults) with these values over it."""
    files = [CHART / "ci" / f"{profile}-values.yaml"] if profile else []
    return [d for d in yaml.safe_load_all(helm_template(helm, tmp_path, values_files=files, values=values).stdout) if d]


# ---- the production profile, port by port ------------------------------------------------------------
_NOTHING = {"gateway": "-", "redis": "-", "ray-head": "-", "ray-worker": "-", "redis-gcs": "-"}
PRODUCTION = {  # source -> {target: ports}; docs/kubernetes.md shows the same table
    # direct ingress is off in production: Serve's gRPC proxy only, and no way to the head's dashboard (Jobs API)
    "gateway": {**_NOTHING, "redis": "6379", "ray-head": "9000", "ray-worker": "9000"},
    "redis": _NOTHING,
    # the GCS's Redis: the RayService's pods alone (the head's GCS; KubeRay's cleanup Job uses the head's template)
    "ray-head": {**_NOTHING, "ray-head": "all", "ray-worker": "all", "redis-gcs": "6379"},
    "ray-worker": {**_NOTHING, "ray-head": "all", "ray-worker": "all", "redis-gcs": "6379"},
    "redis-gcs": _NOTHING,
    "helm-test": {**_NOTHING, "gateway": "8080, 50051"},
    "router": {**_NOTHING, "gateway": "8080, 50051"},
    "prometheus": {**_NOTHING, "gateway": "8080, 50051", "ray-head": "8080, 44217, 44227", "ray-worker": "8080"},
    "monitoring-other": _NOTHING,
    "kuberay-operator": {**_NOTHING, "ray-head": "8265"},
    "kuberay-operator-elsewhere": _NOTHING,
    "neighbour": _NOTHING,
    "stranger": _NOTHING,
}


def test_production_pods_reach_exactly_these_ports(rendered: dict[str, list[dict[str, Any]]]) -> None:
    assert reach_table(rendered["production"]) == PRODUCTION


def test_the_docs_show_the_production_table() -> None:
    """docs/kubernetes.md's table of who reaches what is the one tested above."""
    text = (CHART.parents[1] / "docs" / "kubernetes.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 1 + len(TARGETS) and cells[0] in PRODUCTION:
            rows[cells[0]] = dict(zip(TARGETS, [c.replace("–", "-").replace("all ports", "all") for c in cells[1:]]))
    assert rows == PRODUCTION


# ---- every profile, from its values ------------------------------------------------------------------
@pytest.mark.parametrize("profile", PROFILES)
def test_nothing_reaches_the_ray_pods_but_the_gateway_the_operator_prometheus_and_ray_itself(
    rendered: dict[str, list[dict[str, Any]]], profile: str
) -> None:
    docs = rendered[profile]
    values = values_of(profile)
    if not values["networkPolicy"]["enabled"]:
        assert not find(docs, "NetworkPolicy")
        return
    table = reach_table(docs)
    serve, dashboard = values["serve"]["grpcPort"], values["serve"]["dashboardPort"]
    direct = values["embedder"]["directIngress"]
    grpc = {serve, *(range(direct["grpcPortMin"], direct["grpcPortMax"] + 1) if direct["enabled"] else [])}
    to_head = grpc | ({dashboard} if direct["enabled"] else set())
    assert table["gateway"]["ray-worker"] == spans(frozenset(grpc))
    assert table["gateway"]["ray-head"] == spans(frozenset(to_head))
    operator = operator_pod(values)
    net, pods = Network(docs), release_pods(docs)
    assert net.reach(operator, pods["ray-head"]) == {dashboard} and net.reach(operator, pods["ray-worker"]) == NONE
    metrics = values["networkPolicy"]["monitoring"]
    for ray in ("ray-head", "ray-worker"):
        assert table[ray]["ray-head"] == table[ray]["ray-worker"] == "all", "Ray's own ports, among its pods"
        assert table[ray]["gateway"] == "-" or not values["networkPolicy"]["ingress"]["from"], "only the gateway's open ingress admits Ray"
        for outsider in ("neighbour", "stranger", "router", "kuberay-operator-elsewhere", "helm-test"):
            assert table[outsider][ray] == "-", (outsider, ray)
        # Prometheus's namespace reaches the metrics ports only: every pod of it when no pod labels are named
        for name in ("prometheus", "monitoring-other"):
            matched = metrics["namespace"] == "monitoring" and OUTSIDERS[name].labels.items() >= metrics["podLabels"].items()
            wanted = ("8080, 44217, 44227" if ray == "ray-head" else "8080") if matched else "-"
            assert table[name][ray] == wanted, (name, ray)
    if "redis" in table["gateway"]:
        assert {s for s, row in table.items() if row["redis"] != "-"} == {"gateway"}


@pytest.mark.parametrize("profile", PROFILES)
def test_only_the_operator_and_the_gateway_reach_the_ray_dashboard_and_jobs_api(
    rendered: dict[str, list[dict[str, Any]]], profile: str
) -> None:
    docs = rendered[profile]
    pods, net = release_pods(docs), Network(docs)
    dashboard = values_of(profile)["serve"]["dashboardPort"]
    everyone = {**pods, **OUTSIDERS}
    everyone["operator"] = operator_pod(values_of(profile))
    reaching = {name for name, pod in everyone.items() if dashboard in net.reach(pod, pods["ray-head"])}
    if not values_of(profile)["networkPolicy"]["enabled"]:
        assert not find(docs, "NetworkPolicy"), "networkPolicy.enabled is false: the chart renders no policy"
        assert reaching == set(everyone), "no policy: nothing stands between any pod and the dashboard"
        return
    expected = {"operator", "ray-head", "ray-worker"}
    if everyone["operator"].namespace == "kuberay-system":
        expected.add("kuberay-operator")  # the same pod as "operator"
    if values_of(profile)["embedder"]["directIngress"]["enabled"]:
        expected.add("gateway")
    assert reaching == expected


def test_the_dashboard_opens_to_more_only_when_a_value_turns_it_on(helm: list[str], tmp_path: Path) -> None:
    ops = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ray-ops"}}}]
    admin = Pod("admin", "ray-ops", {"app": "kubectl"})
    for enabled, direct in [(False, True), (True, True), (True, False), (False, False)]:
        docs = render(helm, tmp_path, {"embedder": {"dashboard": {"enabled": enabled, "from": ops}, "directIngress": {"enabled": direct}}})
        head = release_pods(docs)["ray-head"]
        net = Network(docs)
        assert spans(net.reach(admin, head)) == ("8265" if enabled else "-")
        assert (8265 in net.reach(release_pods(docs)["gateway"], head)) is direct
        assert spans(net.reach(OUTSIDERS["kuberay-operator"], head)) == "8265"
        assert net.reach(admin, release_pods(docs)["ray-worker"]) == NONE
    failed = helm_template(helm, tmp_path, values={"embedder": {"dashboard": {"enabled": True}}}, check=False)
    assert failed.returncode != 0 and "embedder.dashboard.enabled needs embedder.dashboard.from" in failed.stderr


def test_network_policy_needs_the_kuberay_operator_namespace(helm: list[str], tmp_path: Path) -> None:
    failed = helm_template(helm, tmp_path, values={"networkPolicy": {"enabled": True}}, check=False)
    assert failed.returncode != 0 and "networkPolicy.kuberayOperator.namespace" in failed.stderr
    docs = render(helm, tmp_path, {"networkPolicy": {"enabled": True, "kuberayOperator": {"namespace": "default"}}}, profile=None)
    head = one(docs, "NetworkPolicy", "-embedder-head")["spec"]
    operator = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}},
    }
    assert head["ingress"][0]["from"][0] == operator
    assert spans(Network(docs).reach(OUTSIDERS["kuberay-operator-elsewhere"], release_pods(docs)["ray-head"])) == "8265"
    assert Network(docs).reach(OUTSIDERS["kuberay-operator"], release_pods(docs)["ray-head"]) == NONE


def test_with_the_head_in_the_serve_service_the_operator_also_checks_its_serve_proxy(helm: list[str], tmp_path: Path) -> None:
    """KubeRay labels the head for the serve Service after a GET /-/healthz on its Serve HTTP proxy (port 8000)."""
    docs = render(helm, tmp_path, {"embedder": {"excludeHeadPodFromServeSvc": False}})
    table = reach_table(docs)
    assert table["kuberay-operator"] == {**_NOTHING, "ray-head": "8000, 8265"}
    assert table["gateway"]["ray-head"] == "9000" and table["neighbour"]["ray-head"] == "-"


def test_no_metrics_port_opens_without_a_monitoring_namespace(helm: list[str], tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"networkPolicy": {"monitoring": {"namespace": "", "podLabels": {}}}})
    table = reach_table(docs)
    assert table["prometheus"] == {**_NOTHING, "gateway": "8080, 50051"}


def test_a_classifiers_port_opens_to_whoever_reaches_the_gateway_and_to_no_one_else(helm: list[str], tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"classifiers": {"prompt_guard": {"configMap": {"name": "router-classifiers"}, "port": 8082}}})
    table = reach_table(docs)
    assert table["router"]["gateway"] == table["helm-test"]["gateway"] == "8080, 8082, 50051"
    assert table["neighbour"]["gateway"] == table["stranger"]["gateway"] == "-"
    assert {source: row for source, row in table.items() if source not in ("router", "helm-test", "prometheus")} == {
        source: row for source, row in PRODUCTION.items() if source not in ("router", "helm-test", "prometheus")
    }


# ---- the router edge -------------------------------------------------------------------------------
def test_the_router_edge_admits_the_router_alone_to_a_gateway_without_api_keys(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["loadtest"]  # networkPolicy.router.namespace: llm-router, no API keys
    assert values_of("loadtest")["networkPolicy"]["router"] == {"namespace": "llm-router", "podLabels": {}}
    (rule,) = one(docs, "NetworkPolicy", "-gateway")["spec"]["ingress"]
    router = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "llm-router"}}}
    assert rule["from"][0] == router
    table = reach_table(docs)
    assert {s for s, row in table.items() if row["gateway"] != "-"} == {"router", "helm-test", "locust-master", "locust-worker"}
    assert "MCP_CLASSIFIER_API_KEYS_FILE" not in one(docs, "ConfigMap", "-gateway")["data"]
    assert not [
        v for v in gateway(docs)["spec"]["template"]["spec"]["volumes"] if v.get("secret", {}).get("secretName", "").endswith("api-keys")
    ]


@pytest.mark.parametrize(
    "router, peer, admitted, refused",
    [
        (
            {"namespace": "", "podLabels": {"app.kubernetes.io/name": "semantic-router"}},
            {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "semantic-router"}}},
            Pod("r", NAMESPACE, {"app.kubernetes.io/name": "semantic-router"}),
            Pod("r", "llm-router", {"app.kubernetes.io/name": "semantic-router"}),  # labels alone: the release's namespace only
        ),
        (
            {"namespace": "llm-router", "podLabels": {"app.kubernetes.io/name": "semantic-router"}},
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "llm-router"}},
                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "semantic-router"}},
            },
            Pod("r", "llm-router", {"app.kubernetes.io/name": "semantic-router", "pod-template-hash": "x"}),
            Pod("r", "llm-router", {"app.kubernetes.io/name": "envoy"}),  # both: that label in that namespace
        ),
    ],
)
def test_the_router_edge_is_one_namespace_or_pod_label_peer(
    helm: list[str], tmp_path: Path, router: dict[str, Any], peer: dict[str, Any], admitted: Pod, refused: Pod
) -> None:
    values = {"networkPolicy": {"router": router}, "auth": {"existingSecret": ""}, "gateway": {"serviceMonitor": {"enabled": False}}}
    docs = render(helm, tmp_path, _without_ingress_from(values))
    (rule,) = one(docs, "NetworkPolicy", "-gateway")["spec"]["ingress"]
    assert rule["from"] == [peer, {"podSelector": {"matchLabels": {**_release("test")}}}]
    net, target = Network(docs), release_pods(docs)["gateway"]
    assert spans(net.reach(admitted, target)) == "8080, 50051"
    assert net.reach(refused, target) == NONE
    assert net.reach(OUTSIDERS["neighbour"], target) == NONE and net.reach(OUTSIDERS["prometheus"], target) == NONE


def test_at_the_router_edge_prometheus_gets_in_only_for_the_service_monitor(helm: list[str], tmp_path: Path) -> None:
    values = _without_ingress_from(
        {"networkPolicy": {"router": {"namespace": "llm-router", "podLabels": {}}}, "auth": {"existingSecret": ""}}
    )
    docs = render(helm, tmp_path, values)
    table = reach_table(docs)
    assert {s for s, row in table.items() if row["gateway"] != "-"} == {"router", "prometheus", "helm-test"}


def _release(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "mcp-classifier", "app.kubernetes.io/instance": RELEASE, "app.kubernetes.io/component": component}


def _without_ingress_from(values: dict[str, Any]) -> dict[str, Any]:
    values["networkPolicy"] = {**values.get("networkPolicy", {}), "ingress": {"from": []}}
    return values


POLICY_ON = {"enabled": True, "kuberayOperator": {"namespace": "kuberay-system", "podLabels": {}}}
ROUTER = {"namespace": "llm-router", "podLabels": {}}


@pytest.mark.parametrize(
    "values, message",
    [
        ({"networkPolicy": {**POLICY_ON, "router": ROUTER}, "auth": {"apiKeys": ["a-key-of-16-chars-or-more"]}}, "leave auth.apiKeys"),
        ({"networkPolicy": {**POLICY_ON, "router": ROUTER}, "auth": {"existingSecret": "keys"}}, "leave auth.apiKeys"),
        ({"networkPolicy": {"router": ROUTER}}, "needs networkPolicy.enabled=true"),
        (
            {"networkPolicy": {**POLICY_ON, "router": ROUTER, "ingress": {"from": [{"namespaceSelector": {}}]}}},
            "leave networkPolicy.ingress.from empty",
        ),
    ],
)
def test_the_router_edge_refuses_values_that_would_blur_it(helm: list[str], tmp_path: Path, values: dict[str, Any], message: str) -> None:
    failed = helm_template(helm, tmp_path, values=values, check=False)
    assert failed.returncode != 0 and message in failed.stderr, failed.stderr


# ---- Ray token authentication ---------------------------------------------------------------------
def test_ray_in_use_supports_token_authentication_and_the_chart_pins_the_same_ray() -> None:
    import tomllib
    from importlib.metadata import version

    from ray._raylet import AuthenticationMode

    pins = [d for d in tomllib.loads((CHART.parents[1] / "pyproject.toml").read_text())["project"]["dependencies"] if d.startswith("ray[")]
    assert pins == [f"ray[serve]=={version('ray')}"]
    assert tuple(int(x) for x in version("ray").split(".")[:2]) >= (2, 52) and AuthenticationMode.TOKEN
    assert values_of("")["embedder"]["rayVersion"] == version("ray")
    assert values_of("")["embedder"]["rayAuth"]["mode"] == "token"


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_turns_on_ray_token_auth_with_the_token_from_a_secret(
    rendered: dict[str, list[dict[str, Any]]], profile: str
) -> None:
    docs = rendered[profile]
    auth = one(docs, "RayService")["spec"]["rayClusterConfig"]["authOptions"]
    existing = values_of(profile)["embedder"]["rayAuth"]["existingSecret"]
    assert auth == {"mode": "token", "secretName": existing or f"{RELEASE}-mcp-classifier-ray-auth"}
    secrets = [s for s in find(docs, "Secret") if s["metadata"]["name"] == auth["secretName"]]
    if existing:
        assert not secrets  # yours: the chart only names it
        return
    (secret,) = secrets
    token = base64.b64decode(secret["data"]["auth_token"]).decode()
    assert len(token) == 64 and token.isalnum()
    others = json.dumps([d for d in docs if d is not secret])
    assert token not in others and secret["data"]["auth_token"] not in others


@pytest.mark.parametrize("direct", [True, False])
def test_the_gateway_holds_the_ray_token_only_to_read_the_serve_rest_api(helm: list[str], tmp_path: Path, direct: bool) -> None:
    docs = render(helm, tmp_path, {"embedder": {"directIngress": {"enabled": direct}}})
    spec = gateway(docs)["spec"]["template"]["spec"]
    volumes = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == "mcp-classifier-ray-auth"]
    config = one(docs, "ConfigMap", "-gateway")["data"]
    if not direct:
        assert not volumes and "MCP_CLASSIFIER_RAY_AUTH_TOKEN_FILE" not in config
        return
    (volume,) = volumes
    (mount,) = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert mount["readOnly"] is True and volume["secret"]["items"] == [{"key": "auth_token", "path": "auth_token"}]
    assert config["MCP_CLASSIFIER_RAY_AUTH_TOKEN_FILE"] == f"{mount['mountPath']}/auth_token"
    assert "RAY_AUTH_TOKEN" not in json.dumps(spec["containers"][0].get("env", []))  # a file, never env


def test_ray_token_auth_can_be_turned_off_and_needs_ray_2_52(helm: list[str], tmp_path: Path) -> None:
    docs = render(helm, tmp_path, {"embedder": {"rayAuth": {"mode": "disabled", "existingSecret": ""}}})
    assert "authOptions" not in one(docs, "RayService")["spec"]["rayClusterConfig"]
    assert "ray-auth" not in json.dumps([d for d in docs if d["kind"] in ("Secret", "Deployment", "ConfigMap")])
    failed = helm_template(helm, tmp_path, values={"embedder": {"rayVersion": "2.51.1"}}, check=False)
    assert failed.returncode != 0 and "needs Ray 2.52.0 or later" in failed.stderr
    assert helm_template(helm, tmp_path, values={"embedder": {"rayVersion": "2.51.1", "rayAuth": {"mode": "disabled"}}}).returncode == 0
