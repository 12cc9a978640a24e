{{/* ---------------------------------------------------------------------------------------------
Names and labels
--------------------------------------------------------------------------------------------- */}}

{{- define "mcp-classifier.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mcp-classifier.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "mcp-classifier.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of one component: include "mcp-classifier.selectorLabels" (list $ "gateway") */}}
{{- define "mcp-classifier.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "mcp-classifier.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* All labels of one component's objects: include "mcp-classifier.labels" (list $ "gateway") */}}
{{- define "mcp-classifier.labels" -}}
{{- $root := index . 0 -}}
{{ include "mcp-classifier.selectorLabels" . }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: {{ include "mcp-classifier.name" $root }}
helm.sh/chart: {{ include "mcp-classifier.chart" $root }}
{{- with $root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "mcp-classifier.gateway.fullname" -}}
{{- printf "%s-gateway" (include "mcp-classifier.fullname" . | trunc 55 | trimSuffix "-") -}}
{{- end -}}

{{- define "mcp-classifier.redis.fullname" -}}
{{- printf "%s-redis" (include "mcp-classifier.fullname" . | trunc 57 | trimSuffix "-") -}}
{{- end -}}

{{/* The Redis of the chart's cache: its password's Secret (redis.auth.existingSecret, or one the chart generates). */}}
{{- define "mcp-classifier.redis.secretName" -}}
{{- default (include "mcp-classifier.redis.fullname" .) .Values.redis.auth.existingSecret -}}
{{- end -}}
{{- define "mcp-classifier.redis.secretKey" -}}
{{- if .Values.redis.auth.existingSecret }}{{ .Values.redis.auth.existingSecretPasswordKey }}{{ else }}password{{ end -}}
{{- end -}}

{{/* The Redis the Ray head's GCS keeps its state in, when the chart runs it (gcsFaultTolerance without externalAddress). */}}
{{- define "mcp-classifier.gcsRedis.fullname" -}}
{{- printf "%s-redis-gcs" (include "mcp-classifier.fullname" . | trunc 53 | trimSuffix "-") -}}
{{- end -}}
{{- define "mcp-classifier.gcsRedis.enabled" -}}
{{- if and .Values.embedder.gcsFaultTolerance.enabled (not .Values.embedder.gcsFaultTolerance.externalAddress) }}true{{ end -}}
{{- end -}}
{{- define "mcp-classifier.gcsRedis.secretName" -}}
{{- default (include "mcp-classifier.gcsRedis.fullname" .) .Values.gcsRedis.auth.existingSecret -}}
{{- end -}}
{{- define "mcp-classifier.gcsRedis.secretKey" -}}
{{- if .Values.gcsRedis.auth.existingSecret }}{{ .Values.gcsRedis.auth.existingSecretPasswordKey }}{{ else }}password{{ end -}}
{{- end -}}

{{/* A generated password kept across upgrades: include "mcp-classifier.keptSecretValue" (list $ SECRET-NAME KEY LENGTH).
`helm template` cannot look the Secret up and renders a new one each time. */}}
{{- define "mcp-classifier.keptSecretValue" -}}
{{- $root := index . 0 -}}
{{- $value := "" -}}
{{- with lookup "v1" "Secret" $root.Release.Namespace (index . 1) -}}
{{- with .data -}}
{{- $value = index . (index $ 2) | default "" -}}
{{- end -}}
{{- end -}}
{{- $value | default (randAlphaNum (index . 3) | b64enc) -}}
{{- end -}}

{{/* The RayService name is kept short: KubeRay derives cluster, pod and Service names from it. */}}
{{- define "mcp-classifier.rayservice.name" -}}
{{- printf "%s-embedder" (include "mcp-classifier.fullname" . | trunc 30 | trimSuffix "-") -}}
{{- end -}}

{{/* KubeRay names the RayService's serve Service <rayservice>-serve-svc; its only port is the one named "serve". */}}
{{- define "mcp-classifier.serveService.name" -}}
{{- printf "%s-serve-svc" (include "mcp-classifier.rayservice.name" .) -}}
{{- end -}}

{{- define "mcp-classifier.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mcp-classifier.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* image reference of a component: include "mcp-classifier.image" (list $ .Values.gateway.image): repository:tag, and
@digest after it when a digest is set (the runtime then pulls by digest; the tag stays for people reading it). */}}
{{- define "mcp-classifier.image" -}}
{{- $root := index . 0 -}}
{{- $image := index . 1 -}}
{{- $tag := default $root.Chart.AppVersion $image.tag -}}
{{- if $image.digest -}}
{{- printf "%s:%s@%s" $image.repository $tag $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount of the Ray pods: its own, with no token mounted. KubeRay binds its autoscaler Role to the
head's ServiceAccount; the autoscaler sidecar alone gets a token (rayservice.yaml). */}}
{{- define "mcp-classifier.ray.serviceAccountName" -}}
{{- printf "%s-ray" (include "mcp-classifier.fullname" . | trunc 59 | trimSuffix "-") -}}
{{- end -}}

{{/* imagePullSecrets block for a non-empty list of secret names (callers guard with `with`). */}}
{{- define "mcp-classifier.pullSecrets" -}}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end -}}

{{/* ---------------------------------------------------------------------------------------------
Addresses
--------------------------------------------------------------------------------------------- */}}

{{/* The Serve REST API on the RayService's head (KubeRay names its Service <rayservice>-head-svc; the dashboard port). */}}
{{- define "mcp-classifier.serveApiUrl" -}}
{{- printf "http://%s-head-svc.%s.svc:%d" (include "mcp-classifier.rayservice.name" .) .Release.Namespace (int .Values.serve.dashboardPort) -}}
{{- end -}}

{{- define "mcp-classifier.backendAddress" -}}
{{- printf "grpc://%s:%d" (include "mcp-classifier.serveService.name" .) (int .Values.serve.grpcPort) -}}
{{- end -}}

{{/* Port of an URL's authority part, else the given default: include "mcp-classifier.urlPort" (list URL DEFAULT) */}}
{{- define "mcp-classifier.urlPort" -}}
{{- $url := index . 0 -}}
{{- $authority := regexReplaceAll "^[a-zA-Z][a-zA-Z0-9+.-]*://" $url "" -}}
{{- $authority = regexReplaceAll "[/?#].*$" $authority "" -}}
{{- $authority = regexReplaceAll "^.*@" $authority "" -}}
{{- $port := regexFind ":[0-9]+$" $authority | trimPrefix ":" -}}
{{- if $port }}{{ $port }}{{ else }}{{ index . 1 }}{{ end -}}
{{- end -}}

{{- define "mcp-classifier.redis.externalPort" -}}
{{- include "mcp-classifier.urlPort" (list .Values.externalRedis.url 6379) -}}
{{- end -}}

{{/* Without an explicit port: 443 for https (and for gRPC, whose default port is 443), 80 for plain HTTP. */}}
{{- define "mcp-classifier.otel.port" -}}
{{- $default := 443 -}}
{{- if and (hasPrefix "http://" .Values.otel.endpoint) (ne .Values.otel.protocol "grpc") }}{{ $default = 80 }}{{ end -}}
{{- include "mcp-classifier.urlPort" (list .Values.otel.endpoint $default) -}}
{{- end -}}

{{/* The container path of the API keys file and of the categories file. */}}
{{- define "mcp-classifier.apiKeysDir" -}}/etc/mcp-classifier/auth{{- end -}}
{{- define "mcp-classifier.apiKeysFile" -}}/etc/mcp-classifier/auth/api-keys{{- end -}}
{{- define "mcp-classifier.categoriesDir" -}}/etc/mcp-classifier/categories{{- end -}}
{{- define "mcp-classifier.categoriesFile" -}}/etc/mcp-classifier/categories/categories.yaml{{- end -}}

{{- define "mcp-classifier.auth.enabled" -}}
{{- if or .Values.auth.existingSecret .Values.auth.apiKeys }}true{{ end -}}
{{- end -}}

{{- define "mcp-classifier.auth.secretName" -}}
{{- default (printf "%s-api-keys" (include "mcp-classifier.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "mcp-classifier.auth.secretKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.existingSecretKey }}{{ else }}api-keys{{ end -}}
{{- end -}}

{{/* Ray token authentication (embedder.rayAuth): the Secret KubeRay reads the token from (key auth_token). */}}
{{- define "mcp-classifier.rayAuth.enabled" -}}
{{- if eq .Values.embedder.rayAuth.mode "token" }}true{{ end -}}
{{- end -}}

{{- define "mcp-classifier.rayAuth.secretName" -}}
{{- default (printf "%s-ray-auth" (include "mcp-classifier.fullname" . | trunc 54 | trimSuffix "-")) .Values.embedder.rayAuth.existingSecret -}}
{{- end -}}

{{/* The gateway holds the Ray token only when it reads the Serve REST API (direct ingress) of a token-protected cluster. */}}
{{- define "mcp-classifier.gateway.rayToken" -}}
{{- if and (include "mcp-classifier.rayAuth.enabled" .) .Values.embedder.directIngress.enabled }}true{{ end -}}
{{- end -}}
{{- define "mcp-classifier.rayAuthTokenDir" -}}/etc/mcp-classifier/ray-auth{{- end -}}
{{- define "mcp-classifier.rayAuthTokenFile" -}}/etc/mcp-classifier/ray-auth/auth_token{{- end -}}

{{/* Ray's metrics ports: every node's metrics agent (KubeRay's default metrics-export-port); on the head also the
autoscaler's and the dashboard's own. */}}
{{- define "mcp-classifier.ray.metricsPort" -}}8080{{- end -}}
{{/* Serve's HTTP proxy (serveConfigV2 sets no http_options: Serve's default port). */}}
{{- define "mcp-classifier.ray.serveHttpPort" -}}8000{{- end -}}
{{- define "mcp-classifier.ray.autoscalerMetricsPort" -}}44217{{- end -}}
{{- define "mcp-classifier.ray.dashboardMetricsPort" -}}44227{{- end -}}

{{/* The router edge (networkPolicy.router) is on when it names a namespace or pod labels. */}}
{{- define "mcp-classifier.router.enabled" -}}
{{- if or .Values.networkPolicy.router.namespace .Values.networkPolicy.router.podLabels }}true{{ end -}}
{{- end -}}

{{/* One NetworkPolicyPeer (a list item) from {namespace, podLabels}: the pods with these labels in that namespace;
labels alone: pods in the release's namespace; a namespace alone: all its pods; both empty: nothing. */}}
{{- define "mcp-classifier.namedPeer" -}}
{{- if or .namespace .podLabels }}
- {{- if .namespace }}
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .namespace }}
  {{- end }}
  {{- if .podLabels }}
  podSelector:
    matchLabels:
      {{- toYaml .podLabels | nindent 6 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Peers of this release always admitted to the gateway when its ingress names sources: the `helm test` pod
and, with loadtest.enabled, the Locust master and workers. */}}
{{- define "mcp-classifier.gateway.releasePeers" -}}
# this release's `helm test` pod
- podSelector:
    matchLabels:
      {{- include "mcp-classifier.selectorLabels" (list . "test") | nindent 6 }}
{{- if .Values.loadtest.enabled }}
# this release's Locust master and workers (loadtest.enabled)
- podSelector:
    matchLabels:
      {{- include "mcp-classifier.selectorLabels" (list . "loadtest") | nindent 6 }}
{{- end }}
{{- end -}}

{{- define "mcp-classifier.categories.enabled" -}}
{{- if or .Values.categories.content .Values.categories.existingConfigMap }}true{{ end -}}
{{- end -}}

{{- define "mcp-classifier.categories.configMapName" -}}
{{- default (printf "%s-categories" (include "mcp-classifier.fullname" .)) .Values.categories.existingConfigMap -}}
{{- end -}}

{{- define "mcp-classifier.categories.configMapKey" -}}
{{- if .Values.categories.existingConfigMap }}{{ .Values.categories.existingConfigMapKey }}{{ else }}categories.yaml{{ end -}}
{{- end -}}

{{/* ---------------------------------------------------------------------------------------------
Named classifiers (classifiers): each one's file is <classifiersDir>/<name>.yaml in every pod that mounts the
classifiers volume (the Ray pods, whose replicas classify, and the gateway, which serves the names). Nothing hashes
these files: the processes watch them and reload an edited one in place.
--------------------------------------------------------------------------------------------- */}}
{{- define "mcp-classifier.classifiersDir" -}}/etc/mcp-classifier/classifiers{{- end -}}

{{/* The ConfigMap of the files given inline (classifiers.NAME.file). */}}
{{- define "mcp-classifier.classifiers.configMapName" -}}
{{- printf "%s-classifiers" (include "mcp-classifier.fullname" . | trunc 51 | trimSuffix "-") -}}
{{- end -}}

{{/* The classifiers setting: NAME=PATH,... (by name). */}}
{{- define "mcp-classifier.classifiers.setting" -}}
{{- $pairs := list -}}
{{- range $name, $c := .Values.classifiers -}}
{{- $pairs = append $pairs (printf "%s=%s/%s.yaml" $name (include "mcp-classifier.classifiersDir" $) $name) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* The classify_ports setting: NAME=PORT,... for the classifiers with a port. */}}
{{- define "mcp-classifier.classifyPorts.setting" -}}
{{- $pairs := list -}}
{{- range $name, $c := .Values.classifiers -}}
{{- if $c.port }}{{ $pairs = append $pairs (printf "%s=%d" $name (int $c.port)) }}{{ end -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* A classifier's container and Service port name: include "mcp-classifier.classifier.portName" (list NAME SPEC) */}}
{{- define "mcp-classifier.classifier.portName" -}}
{{- $spec := index . 1 -}}
{{- default (replace "_" "-" (index . 0)) $spec.portName -}}
{{- end -}}

{{/* The volume with every classifier's file: the chart's ConfigMap for the inline ones, each named ConfigMap's key for
the others, projected into one directory (a projected volume is updated in place like a ConfigMap's). */}}
{{- define "mcp-classifier.classifiers.volume" -}}
{{- $inline := list -}}
{{- range $name, $c := .Values.classifiers }}{{ if $c.file }}{{ $inline = append $inline $name }}{{ end }}{{ end -}}
- name: classifiers
  projected:
    sources:
      {{- if $inline }}
      - configMap:
          name: {{ include "mcp-classifier.classifiers.configMapName" . }}
          items:
            {{- range $inline }}
            - key: {{ . }}.yaml
              path: {{ . }}.yaml
            {{- end }}
      {{- end }}
      {{- range $name, $c := .Values.classifiers }}
      {{- with $c.configMap }}
      - configMap:
          name: {{ .name }}
          items:
            - key: {{ default (printf "%s.yaml" $name) .key }}
              path: {{ $name }}.yaml
      {{- end }}
      {{- end }}
{{- end -}}

{{- define "mcp-classifier.classifiers.volumeMount" -}}
- name: classifiers
  mountPath: {{ include "mcp-classifier.classifiersDir" . }}
  readOnly: true
{{- end -}}

{{/* Each classifier's file given once, its ports clear of the gateway's and of each other, its port names valid. */}}
{{- define "mcp-classifier.validateClassifiers" -}}
{{- $g := .Values.gateway -}}
{{- $ports := dict (toString (int $g.port)) "gateway.port" -}}
{{- if $g.grpc.enabled }}{{ $_ := set $ports (toString (int $g.grpc.port)) "gateway.grpc.port" }}{{ end -}}
{{- $names := dict "http" "the gateway's HTTP port" "grpc" "the public gRPC port" -}}
{{- range $name, $c := .Values.classifiers -}}
{{- if not (or $c.file $c.configMap) -}}
{{- fail (printf "classifiers.%s: set its categories file, inline (file) or from a ConfigMap (configMap: {name, key})" $name) -}}
{{- end -}}
{{- if and $c.file $c.configMap -}}
{{- fail (printf "classifiers.%s: set either file or configMap, not both" $name) -}}
{{- end -}}
{{- if and $c.portName (not $c.port) -}}
{{- fail (printf "classifiers.%s.portName names a port: set classifiers.%s.port too" $name $name) -}}
{{- end -}}
{{- if $c.port -}}
{{- $port := toString (int $c.port) -}}
{{- if hasKey $ports $port -}}
{{- fail (printf "classifiers.%s.port %s is already taken by %s" $name $port (get $ports $port)) -}}
{{- end -}}
{{- $_ := set $ports $port (printf "classifiers.%s.port" $name) -}}
{{- $portName := include "mcp-classifier.classifier.portName" (list $name $c) -}}
{{- if or (gt (len $portName) 15) (not (regexMatch "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$" $portName)) (not (regexMatch "[a-z]" $portName)) (contains "--" $portName) -}}
{{- fail (printf "classifiers.%s: %q is not a Kubernetes port name (at most 15 lowercase letters, digits and single '-', a letter among them): set classifiers.%s.portName" $name $portName $name) -}}
{{- end -}}
{{- if hasKey $names $portName -}}
{{- fail (printf "classifiers.%s: the port name %q is already %s: set classifiers.%s.portName" $name $portName (get $names $portName) $name) -}}
{{- end -}}
{{- $_ := set $names $portName (printf "classifier %s's" $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* ---------------------------------------------------------------------------------------------
Value checks that a JSON schema cannot express. Included by every workload template.
--------------------------------------------------------------------------------------------- */}}
{{- define "mcp-classifier.validate" -}}
{{- $g := .Values.gateway -}}
{{- if and $g.hpa.enabled (gt (int $g.hpa.minReplicas) (int $g.hpa.maxReplicas)) -}}
{{- fail (printf "gateway.hpa.minReplicas (%d) must not exceed gateway.hpa.maxReplicas (%d)" (int $g.hpa.minReplicas) (int $g.hpa.maxReplicas)) -}}
{{- end -}}
{{- if and $g.pdb.enabled (ne (toString $g.pdb.minAvailable) "") (ne (toString $g.pdb.maxUnavailable) "") -}}
{{- fail "gateway.pdb: set only one of minAvailable and maxUnavailable" -}}
{{- end -}}
{{- if and $g.pdb.enabled (eq (toString $g.pdb.minAvailable) "") (eq (toString $g.pdb.maxUnavailable) "") -}}
{{- fail "gateway.pdb: set one of minAvailable and maxUnavailable" -}}
{{- end -}}
{{- $drain := add (int $g.preStopSleepSeconds) (include "mcp-classifier.gateway.shutdownSeconds" . | int) -}}
{{- if le (int $g.terminationGracePeriodSeconds) $drain -}}
{{- fail (printf "gateway.terminationGracePeriodSeconds (%d) must exceed preStopSleepSeconds + the server's graceful drain (%d s)" (int $g.terminationGracePeriodSeconds) $drain) -}}
{{- end -}}
{{- if and .Values.redis.enabled .Values.externalRedis.url -}}
{{- fail "set either redis.enabled or externalRedis.url, not both" -}}
{{- end -}}
{{- if not (or .Values.redis.enabled .Values.externalRedis.url) -}}
{{- fail "the gateway needs Redis: set redis.enabled=true or externalRedis.url" -}}
{{- end -}}
{{- if and .Values.categories.content .Values.categories.existingConfigMap -}}
{{- fail "set either categories.content or categories.existingConfigMap, not both" -}}
{{- end -}}
{{- include "mcp-classifier.validateClassifiers" . -}}
{{- if and .Values.auth.apiKeys .Values.auth.existingSecret -}}
{{- fail "set either auth.apiKeys or auth.existingSecret, not both" -}}
{{- end -}}
{{- $np := .Values.networkPolicy -}}
{{- if include "mcp-classifier.router.enabled" . -}}
{{- if not $np.enabled -}}
{{- fail "networkPolicy.router admits a client without API keys: it needs networkPolicy.enabled=true (the policy is then the gateway's only guard)" -}}
{{- end -}}
{{- if include "mcp-classifier.auth.enabled" . -}}
{{- fail "networkPolicy.router is a client that sends no API key: leave auth.apiKeys and auth.existingSecret empty (the gateway would refuse it)" -}}
{{- end -}}
{{- if $np.ingress.from -}}
{{- fail "networkPolicy.router admits exactly one client to a gateway without API keys: leave networkPolicy.ingress.from empty" -}}
{{- end -}}
{{- end -}}
{{- if and $np.enabled (not $np.kuberayOperator.namespace) -}}
{{- fail "networkPolicy.enabled needs networkPolicy.kuberayOperator.namespace: the KubeRay operator deploys Serve through the Ray head's dashboard port, which the policy opens only to it and the gateway" -}}
{{- end -}}
{{- if and .Values.embedder.dashboard.enabled (not .Values.embedder.dashboard.from) -}}
{{- fail "embedder.dashboard.enabled needs embedder.dashboard.from: the peers that may reach the Ray dashboard" -}}
{{- end -}}
{{- if and (include "mcp-classifier.rayAuth.enabled" .) (semverCompare "<2.52.0-0" .Values.embedder.rayVersion) -}}
{{- fail (printf "embedder.rayAuth.mode token needs Ray 2.52.0 or later (embedder.rayVersion is %s): upgrade Ray or set embedder.rayAuth.mode=disabled" .Values.embedder.rayVersion) -}}
{{- end -}}
{{- if and .Values.otel.enabled (not .Values.otel.endpoint) -}}
{{- fail "otel.enabled needs otel.endpoint" -}}
{{- end -}}
{{- $e := .Values.embedder -}}
{{- if gt (int $e.workers.minReplicas) (int $e.workers.maxReplicas) -}}
{{- fail "embedder.workers.minReplicas must not exceed embedder.workers.maxReplicas" -}}
{{- end -}}
{{- if gt (int $e.replicas.min) (int $e.replicas.max) -}}
{{- fail "embedder.replicas.min must not exceed embedder.replicas.max" -}}
{{- end -}}
{{- if and (gt (float64 $e.gpusPerReplica) 0.0) (eq (int $e.workers.gpusPerPod) 0) -}}
{{- fail "embedder.gpusPerReplica > 0 needs GPU workers: set embedder.workers.gpusPerPod" -}}
{{- end -}}
{{- if gt (mulf $e.replicas.min $e.gpusPerReplica) (mulf $e.workers.maxReplicas $e.workers.gpusPerPod) -}}
{{- fail "embedder.replicas.min * gpusPerReplica exceeds the GPUs of embedder.workers.maxReplicas worker pods: the RayService could never become ready" -}}
{{- end -}}
{{- $hubId := and (ne $e.model "builtin:minilm") (not (hasPrefix "/" $e.model)) (not (hasPrefix "random:" $e.model)) -}}
{{- if and $e.modelRevision (not $hubId) -}}
{{- fail (printf "embedder.modelRevision applies to a hub id; %s has none: set embedder.modelRevision=\"\"" $e.model) -}}
{{- end -}}
{{- $delivery := $e.modelDelivery -}}
{{- if and $hubId (eq $delivery.mode "hub") (not (regexMatch "^[0-9a-f]{40}$" $e.modelRevision)) -}}
{{- fail (printf "embedder.modelDelivery.mode hub downloads %s at each pod's start: pin embedder.modelRevision to a 40-hex commit of it, so every replica runs the same weights" $e.model) -}}
{{- end -}}
{{- if and (eq $delivery.mode "volume") (not $delivery.volume) -}}
{{- fail "embedder.modelDelivery.mode volume needs embedder.modelDelivery.volume: a volume source holding the hub cache (a persistentVolumeClaim, or an image volume)" -}}
{{- end -}}
{{- if and (eq $e.upgradeStrategy "NewClusterWithIncrementalUpgrade") (not $e.clusterUpgradeOptions.gatewayClassName) -}}
{{- fail "embedder.upgradeStrategy NewClusterWithIncrementalUpgrade needs embedder.clusterUpgradeOptions.gatewayClassName: KubeRay splits the traffic through a Gateway of that class" -}}
{{- end -}}
{{- if and $e.gcsFaultTolerance.existingSecret (not $e.gcsFaultTolerance.externalAddress) -}}
{{- fail "embedder.gcsFaultTolerance.existingSecret is the password of your Redis at externalAddress: for the chart's own, set gcsRedis.auth.existingSecret" -}}
{{- end -}}
{{- end -}}

{{/* `mcp-classifier serve` drains for this long on SIGTERM (the shutdown_timeout_s setting's default; a test keeps them equal). */}}
{{- define "mcp-classifier.gateway.shutdownSeconds" -}}10{{- end -}}

{{/* ---------------------------------------------------------------------------------------------
Environment
--------------------------------------------------------------------------------------------- */}}

{{/* OTEL_* variables for a pod: include "mcp-classifier.otelEnv" (list $ "mcp-classifier-gateway") */}}
{{- define "mcp-classifier.otelEnv" -}}
{{- $root := index . 0 -}}
{{- $o := $root.Values.otel -}}
{{- if $o.enabled }}
- name: OTEL_SERVICE_NAME
  value: {{ index . 1 | quote }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $o.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $o.protocol | quote }}
- name: OTEL_TRACES_EXPORTER
  value: otlp
- name: OTEL_METRICS_EXPORTER
  value: none
- name: OTEL_LOGS_EXPORTER
  value: none
- name: OTEL_TRACES_SAMPLER
  value: {{ $o.tracesSampler | quote }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $o.tracesSamplerArg | quote }}
- name: OTEL_K8S_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: OTEL_K8S_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- $attrs := list "k8s.namespace.name=$(OTEL_K8S_NAMESPACE)" "k8s.pod.name=$(OTEL_K8S_POD_NAME)" (printf "service.namespace=%s" $root.Release.Name) -}}
{{- range $k, $v := $o.resourceAttributes }}
{{- $attrs = append $attrs (printf "%s=%s" $k $v) -}}
{{- end }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ join "," $attrs | quote }}
{{- if $o.headersSecret.name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ $o.headersSecret.name }}
      key: {{ $o.headersSecret.key }}
{{- end }}
{{- end }}
{{- end -}}

{{/* MCP_CLASSIFIER_REDIS_URL; the password comes from a Secret through $(REDIS_PASSWORD), never from values. */}}
{{- define "mcp-classifier.redisEnv" -}}
{{- if .Values.redis.enabled }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "mcp-classifier.redis.secretName" . }}
      key: {{ include "mcp-classifier.redis.secretKey" . }}
- name: MCP_CLASSIFIER_REDIS_URL
  value: {{ printf "redis://:$(REDIS_PASSWORD)@%s:%d/0" (include "mcp-classifier.redis.fullname" .) (int .Values.redis.port) | quote }}
{{- else }}
{{- if .Values.externalRedis.existingSecret }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .Values.externalRedis.existingSecret }}
      key: {{ .Values.externalRedis.existingSecretPasswordKey }}
- name: MCP_CLASSIFIER_REDIS_URL
  value: {{ regexReplaceAll "^(rediss?://)(?:([^:@/]*)(?::[^@/]*)?@)?" .Values.externalRedis.url "${1}${2}:$$(REDIS_PASSWORD)@" | quote }}
{{- else }}
- name: MCP_CLASSIFIER_REDIS_URL
  value: {{ .Values.externalRedis.url | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* ---------------------------------------------------------------------------------------------
serveConfigV2: the same dict as mcp_classifier.embedder.serve_config.serve_config(Settings(...)).
replica settings are listed only when they differ from the Settings defaults, like replica_settings().
tests/test_helm_chart.py renders this and compares it with `mcp-classifier serve-config`.
--------------------------------------------------------------------------------------------- */}}
{{- define "mcp-classifier.serveConfig" -}}
{{- $e := .Values.embedder -}}
{{- $settings := dict -}}
{{- if ne $e.model "builtin:minilm" }}{{ $_ := set $settings "model" $e.model }}{{ end -}}
{{- if $e.modelRevision }}{{ $_ := set $settings "model_revision" $e.modelRevision }}{{ end -}}
{{- if ne $e.device "auto" }}{{ $_ := set $settings "device" $e.device }}{{ end -}}
{{- if ne $e.dtype "auto" }}{{ $_ := set $settings "dtype" $e.dtype }}{{ end -}}
{{- if ne $e.pooling "auto" }}{{ $_ := set $settings "pooling" $e.pooling }}{{ end -}}
{{- if ne $e.queryInstruction "auto" }}{{ $_ := set $settings "query_instruction" $e.queryInstruction }}{{ end -}}
{{- if ne (int $e.maxSeqLength) 256 }}{{ $_ := set $settings "max_seq_length" (int $e.maxSeqLength) }}{{ end -}}
{{- if ne (int $e.torchThreads) 0 }}{{ $_ := set $settings "torch_threads" (int $e.torchThreads) }}{{ end -}}
{{- if ne $e.cpuPinning "auto" }}{{ $_ := set $settings "replica_cpu_pinning" $e.cpuPinning }}{{ end -}}
{{- if ne (int $e.tokenizerThreads) 0 }}{{ $_ := set $settings "tokenizer_threads" (int $e.tokenizerThreads) }}{{ end -}}
{{- if ne (float64 $e.forwardOverheadTokens) 0.0 }}{{ $_ := set $settings "forward_overhead_tokens" $e.forwardOverheadTokens }}{{ end -}}
{{- if ne (int $e.packWidthTokens) 64 }}{{ $_ := set $settings "pack_width_tokens" (int $e.packWidthTokens) }}{{ end -}}
{{- if ne $e.scoringMethod "auto" }}{{ $_ := set $settings "scoring_method" $e.scoringMethod }}{{ end -}}
{{- if ne $e.cudaGraphs "auto" }}{{ $_ := set $settings "cuda_graphs" $e.cudaGraphs }}{{ end -}}
{{- if ne $e.fusedNorms "auto" }}{{ $_ := set $settings "fused_norms" $e.fusedNorms }}{{ end -}}
{{- if ne $e.fusedRotary "auto" }}{{ $_ := set $settings "fused_rotary" $e.fusedRotary }}{{ end -}}
{{- if ne $e.compiledLayers "auto" }}{{ $_ := set $settings "compiled_layers" $e.compiledLayers }}{{ end -}}
{{- if ne (int $e.fp16WeightsMaxTokens) 128 }}{{ $_ := set $settings "fp16_weights_max_tokens" (int $e.fp16WeightsMaxTokens) }}{{ end -}}
{{- if ne $e.middleLayerFeatures "off" }}{{ $_ := set $settings "middle_layer_features" $e.middleLayerFeatures }}{{ end -}}
{{- if ne $e.lexicalScoring "auto" }}{{ $_ := set $settings "lexical_scoring" $e.lexicalScoring }}{{ end -}}
{{- if ne $e.tokenMatching "auto" }}{{ $_ := set $settings "token_matching" $e.tokenMatching }}{{ end -}}
{{- if not $e.scopeBackground }}{{ $_ := set $settings "scope_background" false }}{{ end -}}
{{- if ne $e.secondLabels "parts" }}{{ $_ := set $settings "second_labels" $e.secondLabels }}{{ end -}}
{{- if ne $e.servedLanguages "auto" }}{{ $_ := set $settings "served_languages" $e.servedLanguages }}{{ end -}}
{{- if ne (float64 $e.languageMinConfidence) 0.9 }}{{ $_ := set $settings "language_min_confidence" $e.languageMinConfidence }}{{ end -}}
{{- if ne (int $e.batchSize) 32 }}{{ $_ := set $settings "batch_size" (int $e.batchSize) }}{{ end -}}
{{- if include "mcp-classifier.categories.enabled" . }}{{ $_ := set $settings "categories_file" (include "mcp-classifier.categoriesFile" .) }}{{ end -}}
{{- if .Values.classifiers -}}
{{- $named := dict -}}
{{- range $name, $c := .Values.classifiers }}{{ $_ := set $named $name (printf "%s/%s.yaml" (include "mcp-classifier.classifiersDir" $) $name) }}{{ end -}}
{{- $_ := set $settings "classifiers" $named -}}
{{- end -}}
{{- $deployment := dict
      "name" "Embedder"
      "max_ongoing_requests" (max (int $e.maxOngoingRequests) (int $e.batchSize))
      "ray_actor_options" (dict "num_cpus" $e.cpusPerReplica "num_gpus" $e.gpusPerReplica)
      "health_check_period_s" $e.healthCheckPeriodS
      "logging_config" (dict "enable_access_log" $e.accessLog)
      "autoscaling_config" (dict
          "min_replicas" (int $e.replicas.min)
          "max_replicas" (max (int $e.replicas.max) (int $e.replicas.min))
          "target_ongoing_requests" $e.targetOngoingRequests)
      "user_config" (dict
          "max_batch_size" (int $e.batchSize)
          "batch_wait_timeout_s" (divf $e.batchWindowMs 1000)
          "batch_slot_chars" (int $e.batchSlotChars)) -}}
{{- $app := dict
      "name" .Values.serve.appName
      "route_prefix" (printf "/%s" .Values.serve.appName)
      "import_path" "mcp_classifier.embedder.deployment:build_app"
      "runtime_env" (dict "env_vars" (include "mcp-classifier.ompEnv" $e | fromYaml))
      "args" (dict "settings" $settings)
      "deployments" (list $deployment) -}}
{{- $config := dict
      "proxy_location" "EveryNode"
      "grpc_options" (dict
          "port" (int .Values.serve.grpcPort)
          "grpc_servicer_functions" (list "mcp_classifier.api.v1.classifier_pb2_grpc.add_ClassifierServicer_to_server"))
      "applications" (list $app) -}}
{{- toYaml $config -}}
{{- end -}}

{{/* Gateway processes per pod: gateway.workers, or one per CPU the pod requests (rounded up), at most maxWorkers. */}}
{{- define "mcp-classifier.gateway.workers" -}}
{{- $g := .Values.gateway -}}
{{- if gt (int $g.workers) 0 -}}
{{- int $g.workers -}}
{{- else -}}
{{- $cpu := toString (dig "requests" "cpu" "1" ($g.resources | default dict)) -}}
{{- $milli := 0 -}}
{{- if hasSuffix "m" $cpu -}}
{{- $milli = trimSuffix "m" $cpu | int -}}
{{- else -}}
{{- $milli = mulf (float64 $cpu) 1000 | int -}}
{{- end -}}
{{- max 1 (min (div (add $milli 999) 1000) (int $g.maxWorkers)) -}}
{{- end -}}
{{- end -}}

{{/* What the replicas' torch reads as it loads (util/omp.py omp_env): its threads' wait, a passive thread's bounded spin, MKL's buffers given back. */}}
{{- define "mcp-classifier.ompEnv" -}}
OMP_WAIT_POLICY: {{ upper .ompWaitPolicy | quote }}
MKL_DISABLE_FAST_MM: "1"
{{- if eq .ompWaitPolicy "passive" }}
GOMP_SPINCOUNT: {{ int .ompSpinCount | toString | quote }}
{{- end }}
{{- end }}
