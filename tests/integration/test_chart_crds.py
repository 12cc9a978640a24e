"""The chart's custom resources against the operators' own CRDs, checked as an API server with fieldValidation=Strict would.

The CRDs are upstream data kept outside the project, in ../shared/crds (its README names each source and version):
KubeRay's RayService, prometheus-operator's ServiceMonitor, PodMonitor and PrometheusRule, and the Locust operator's LocustTest in both of its
groups (locust.io since the operator's chart 0.1.6, locust.cloud in 0.1.5 and older). Without that folder the
tests skip. Every ci/ profile is rendered once by the real helm, plus the loadtest profile with the old group.

An API server validates a custom resource against the openAPIV3Schema of the CRD version its apiVersion names,
and with strict field validation refuses any field the schema does not declare, except below
x-kubernetes-preserve-unknown-fields; `metadata` at the root (and in embedded resources) is ObjectMeta. The
schema here is that openAPIV3Schema turned into a JSON Schema that does the same: `additionalProperties: false`
on every object that lists no additionalProperties and does not preserve unknown fields, `nullable`,
x-kubernetes-int-or-string and the uniqueness of x-kubernetes-list-type set/map lists. CEL rules
(x-kubernetes-validations) are not evaluated.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from jsonschema import validators

from tests.integration.test_helm_chart import PROFILES, helm_template
from tests.integration.test_helm_chart import helm as helm  # the helm binary fixture, re-exported for this module's tests

CRDS_DIR = Path(__file__).resolve().parents[3] / "shared" / "crds"
CHECKED_KINDS = ("RayService", "ServiceMonitor", "PodMonitor", "PrometheusRule", "LocustTest")

# ObjectMeta's fields (k8s.io/apimachinery meta/v1), strict: what `metadata` may hold at a resource's root.
OBJECT_META: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "selfLink": {"type": "string"},
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer"},
        "creationTimestamp": {"type": ["string", "null"]},
        "deletionTimestamp": {"type": ["string", "null"]},
        "deletionGracePeriodSeconds": {"type": "integer"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "ownerReferences": {"type": "array", "items": {"type": "object"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "managedFields": {"type": "array", "items": {"type": "object"}},
    },
}
TYPE_META = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}}


# ---- the CRDs and a strict validator ------------------------------------------------------------
def load_crds() -> list[dict[str, Any]]:
    if not CRDS_DIR.is_dir():
        pytest.skip(f"the operators' CRDs are not here: {CRDS_DIR} is absent (it is ../shared/crds beside the checkout)")
    crds = [doc for path in sorted(CRDS_DIR.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert all(doc["kind"] == "CustomResourceDefinition" for doc in crds)
    return crds


def served_schema(crds: list[dict[str, Any]], api_version: str, kind: str) -> dict[str, Any]:
    """The openAPIV3Schema an API server applies to `kind` at `api_version`; LookupError when no CRD serves it."""
    group, _, version = api_version.rpartition("/")
    for crd in crds:
        spec = crd["spec"]
        if spec["group"] != group or spec["names"]["kind"] != kind:
            continue
        for served in spec["versions"]:
            if served["name"] == version and served.get("served"):
                return served["schema"]["openAPIV3Schema"]
    raise LookupError(f"no CRD here serves {kind} at {api_version}")


def strict(node: Any, *, root: bool = False) -> Any:
    """The structural schema `node` as a JSON Schema that refuses unknown fields the way strict field validation does."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        key: value
        for key, value in node.items()
        if key not in ("properties", "items", "additionalProperties", "anyOf", "allOf", "oneOf", "not")
    }
    for key in ("items", "not"):
        if key in node:
            out[key] = strict(node[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in node:
            out[key] = [strict(item) for item in node[key]]
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = strict(node["additionalProperties"])
    elif "additionalProperties" in node:
        out["additionalProperties"] = node["additionalProperties"]
    properties = {name: strict(sub) for name, sub in node.get("properties", {}).items()}
    if root or node.get("x-kubernetes-embedded-resource"):
        # apiVersion, kind and metadata are implicit at a resource's root and in embedded resources; metadata is ObjectMeta
        for name, schema in TYPE_META.items():
            properties.setdefault(name, schema)
        meta = node.get("properties", {}).get("metadata")
        if meta is None or set(meta) <= {"type", "description"}:
            properties["metadata"] = OBJECT_META
    if properties or "properties" in node:
        out["properties"] = properties
    is_object = node.get("type") == "object" or "properties" in node
    if is_object and "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False  # nothing undeclared survives here: strict validation calls it an error
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    return out


def _int_or_string(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Iterator[jsonschema.ValidationError]:
    if value and (isinstance(instance, bool) or not isinstance(instance, int | str)):
        yield jsonschema.ValidationError(f"{instance!r} is neither an integer nor a string")


def _list_map_keys(validator: Any, keys: list[str], instance: Any, schema: dict[str, Any]) -> Iterator[jsonschema.ValidationError]:
    if schema.get("x-kubernetes-list-type") != "map" or not isinstance(instance, list):
        return
    seen: set[str] = set()
    for item in instance:
        key = json.dumps([item.get(k) for k in keys] if isinstance(item, dict) else item)
        if key in seen:
            yield jsonschema.ValidationError(f"duplicate entry with {dict(zip(keys, json.loads(key)))} in a list-type map")
        seen.add(key)


CRDValidator = validators.extend(
    jsonschema.Draft7Validator,
    {"x-kubernetes-int-or-string": _int_or_string, "x-kubernetes-list-map-keys": _list_map_keys},
)


def strict_validator(crds: list[dict[str, Any]], doc: dict[str, Any]) -> Any:
    return CRDValidator(strict(served_schema(crds, doc["apiVersion"], doc["kind"]), root=True))


def errors_of(crds: list[dict[str, Any]], doc: dict[str, Any]) -> list[str]:
    found = strict_validator(crds, doc).iter_errors(doc)
    return sorted(f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in found)


# ---- what the chart renders ---------------------------------------------------------------------
RENDERS: dict[str, tuple[str | None, dict[str, Any] | None]] = {
    **{profile: (profile, None) for profile in PROFILES},
    # the Locust operator's chart 0.1.5 and older: group locust.cloud
    "loadtest-locust.cloud": ("loadtest", {"loadtest": {"apiGroup": "locust.cloud"}}),
    # production with the options no profile takes: the incremental upgrade, your own HA Redis for the GCS, the model
    # on an image volume
    "production-options": (
        "production",
        {
            "embedder": {
                "upgradeStrategy": "NewClusterWithIncrementalUpgrade",
                "clusterUpgradeOptions": {"gatewayClassName": "istio"},
                "gcsFaultTolerance": {
                    "externalAddress": "redis-ha.platform.svc:6379",
                    "existingSecret": "redis-ha",
                    "externalStorageNamespace": "mcp-classifier",
                },
                "modelDelivery": {
                    "mode": "volume",
                    "volume": {"image": {"reference": "registry.example/models/qwen3-embedding:0.6b", "pullPolicy": "IfNotPresent"}},
                },
            }
        },
    ),
}


@pytest.fixture(scope="module")
def crds() -> list[dict[str, Any]]:
    return load_crds()


@pytest.fixture(scope="module")
def custom_resources(helm: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """The RayService, ServiceMonitor and LocustTest objects of every render, once per module."""
    tmp = tmp_path_factory.mktemp("crd-renders")
    chart_ci = Path(__file__).resolve().parents[2] / "helm" / "mcp-classifier" / "ci"
    out = {}
    for name, (profile, values) in RENDERS.items():
        files = [chart_ci / f"{profile}-values.yaml"] if profile else []
        docs = yaml.safe_load_all(helm_template(helm, tmp, values_files=files, values=values).stdout)
        out[name] = [d for d in docs if d and d["kind"] in CHECKED_KINDS]
    return out


def one_of(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return copy.deepcopy(doc)


@pytest.mark.parametrize("render", list(RENDERS))
def test_every_custom_resource_is_accepted_by_its_operators_crd_with_strict_field_validation(
    crds: list[dict[str, Any]], custom_resources: dict[str, list[dict[str, Any]]], render: str
) -> None:
    docs = custom_resources[render]
    assert [d["kind"] for d in docs].count("RayService") == 1, render
    for doc in docs:
        assert errors_of(crds, doc) == [], f"{render}: {doc['kind']} {doc['apiVersion']}"


def test_the_renders_cover_every_checked_kind_and_both_locust_groups(custom_resources: dict[str, list[dict[str, Any]]]) -> None:
    seen = {(d["apiVersion"], d["kind"]) for docs in custom_resources.values() for d in docs}
    assert seen == {
        ("ray.io/v1", "RayService"),
        ("monitoring.coreos.com/v1", "ServiceMonitor"),
        ("monitoring.coreos.com/v1", "PodMonitor"),
        ("monitoring.coreos.com/v1", "PrometheusRule"),
        ("locust.io/v1", "LocustTest"),
        ("locust.cloud/v1", "LocustTest"),
    }


def test_the_locusttest_group_follows_loadtest_api_group(custom_resources: dict[str, list[dict[str, Any]]]) -> None:
    current = one_of(custom_resources["loadtest"], "LocustTest")
    old = one_of(custom_resources["loadtest-locust.cloud"], "LocustTest")
    assert current["apiVersion"] == "locust.io/v1" and old["apiVersion"] == "locust.cloud/v1"
    assert {k: v for k, v in current.items() if k != "apiVersion"} == {k: v for k, v in old.items() if k != "apiVersion"}


def test_the_values_schema_knows_only_the_two_locust_groups(helm: list[str], tmp_path: Path) -> None:
    failed = helm_template(helm, tmp_path, values={"loadtest": {"enabled": True, "apiGroup": "locust.com"}}, check=False)
    assert failed.returncode != 0 and "apiGroup" in failed.stderr


def test_each_locust_group_is_served_by_its_own_operator_version(
    crds: list[dict[str, Any]], custom_resources: dict[str, list[dict[str, Any]]]
) -> None:
    """locust.io by today's CRD (chart 0.1.6 and later), locust.cloud by 0.1.5's; neither CRD serves the other group."""
    current = one_of(custom_resources["loadtest"], "LocustTest")
    old = one_of(custom_resources["loadtest-locust.cloud"], "LocustTest")
    assert errors_of(crds, current) == [] and errors_of(crds, old) == []
    with pytest.raises(LookupError):
        served_schema([c for c in crds if c["spec"]["group"] == "locust.io"], old["apiVersion"], "LocustTest")
    with pytest.raises(LookupError):
        served_schema([c for c in crds if c["spec"]["group"] == "locust.cloud"], current["apiVersion"], "LocustTest")


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    node: Any = doc
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[parts[-1]] = value
    return doc


@pytest.mark.parametrize(
    "render, kind, path, value, complaint",
    [
        # a misspelled field, deep in a pod template: dropped silently without strict validation
        (
            "production",
            "RayService",
            "spec.rayClusterConfig.workerGroupSpecs.0.template.spec.containers.0.imagePullPolicyy",
            "Always",
            "imagePullPolicyy",
        ),
        ("production", "RayService", "spec.rayClusterConfig.authOptions.secretname", "x", "secretname"),
        ("production", "RayService", "spec.rayClusterConfig.authOptions.mode", "tokens", "tokens"),
        ("production", "RayService", "metadata.labelz", {"a": "b"}, "labelz"),
        ("production", "RayService", "spec.rayClusterConfig.headGroupSpec.template.metadata.labelz", {"a": "b"}, "labelz"),
        ("production", "RayService", "spec.rayClusterConfig.workerGroupSpecs.0.replicas", "two", "'two' is not of type 'integer'"),
        ("production", "ServiceMonitor", "spec.endpoints.0.portt", "http", "portt"),
        ("production", "PodMonitor", "spec.podMetricsEndpoints.0.portt", "metrics", "portt"),
        ("production", "PrometheusRule", "spec.groups.0.rules.0.expression", "up", "expression"),
        ("production", "RayService", "spec.rayClusterConfig.gcsFaultToleranceOptions.redisAdress", "x:6379", "redisAdress"),
        ("production-options", "RayService", "spec.upgradeStrategy.clusterUpgradeOptions.maxSurge", 10, "maxSurge"),
        ("loadtest", "LocustTest", "spec.worker.resource", {"limits": {"cpu": "1"}}, "resource"),
        ("loadtest", "LocustTest", "spec.master.resources.limits.cpu", True, "neither an integer nor a string"),
        ("loadtest-locust.cloud", "LocustTest", "spec.workers", 0, "minimum"),
    ],
)
def test_a_wrong_field_is_refused(
    crds: list[dict[str, Any]],
    custom_resources: dict[str, list[dict[str, Any]]],
    render: str,
    kind: str,
    path: str,
    value: Any,
    complaint: str,
) -> None:
    doc = one_of(custom_resources[render], kind)
    assert errors_of(crds, doc) == []
    found = errors_of(crds, _set(doc, path, value))
    assert found and any(complaint in e for e in found), found


def test_list_map_keys_and_int_or_string_are_enforced(
    crds: list[dict[str, Any]], custom_resources: dict[str, list[dict[str, Any]]]
) -> None:
    doc = one_of(custom_resources["production"], "RayService")
    container = doc["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    container["ports"].append(dict(container["ports"][0]))  # ports is a list-type map keyed by containerPort and protocol
    assert any("duplicate entry" in e for e in errors_of(crds, doc))
    doc = one_of(custom_resources["production"], "RayService")
    doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = 4
    assert errors_of(crds, doc) == []  # a quantity may be an integer


def test_unknown_fields_pass_only_below_preserve_unknown_fields() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "fixed": {"type": "object", "properties": {"a": {"type": "string"}}},
                    "empty": {"type": "object"},
                },
            }
        },
    }
    validator = CRDValidator(strict(schema, root=True))
    ok = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "spec": {"free": {"any": {"thing": 1}}, "fixed": {"a": "b"}}}
    assert list(validator.iter_errors(ok)) == []
    for bad in ({"fixed": {"b": "c"}}, {"empty": {"x": 1}}, {"other": 1}):
        assert list(validator.iter_errors({**ok, "spec": bad})), bad
    assert list(validator.iter_errors({**ok, "metadata": {"name": "n", "nam": "typo"}}))
