{{/* Pieces of the RayService pod templates (head and workers). */}}

{{- define "mcp-classifier.ray.podSecurityContext" -}}
# the ray user and group of the rayproject/ray images
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 100
fsGroup: 100
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "mcp-classifier.ray.containerSecurityContext" -}}
allowPrivilegeEscalation: false
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "mcp-classifier.ray.env" -}}
- name: HF_HOME
  value: /home/ray/.cache/huggingface
{{- with .Values.embedder.modelDelivery }}
{{- if ne .mode "hub" }}
# embedder.modelDelivery {{ .mode }}: the weights are already here; the hub is never asked
- name: HF_HUB_CACHE
  value: {{ ternary .imagePath .mountPath (eq .mode "image") | quote }}
- name: HF_HUB_OFFLINE
  value: "1"
{{- end }}
{{- end }}
- name: RAY_SERVE_THROUGHPUT_OPTIMIZED
  value: {{ ternary "1" "0" .Values.embedder.throughputOptimized | quote }}
{{- with .Values.embedder.directIngress }}
# Set either way: throughput-optimized mode would otherwise turn direct ingress on by itself.
- name: RAY_SERVE_ENABLE_DIRECT_INGRESS
  value: {{ ternary "1" "0" .enabled | quote }}
{{- if .enabled }}
- name: RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT
  value: {{ int .grpcPortMin | quote }}
- name: RAY_SERVE_DIRECT_INGRESS_MAX_GRPC_PORT
  value: {{ int .grpcPortMax | quote }}
# A stopping replica keeps serving until every gateway has re-read the list (Serve's default waits 30 s).
- name: RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S
  value: {{ mulf 2 .refreshS | quote }}
{{- end }}
{{- end }}
{{- include "mcp-classifier.otelEnv" (list . "mcp-classifier-embedder") }}
{{- with .Values.embedder.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* include (list $ "head"|"worker"): the model's volume on the workers only (the head runs no replica). */}}
{{- define "mcp-classifier.ray.volumeMounts" -}}
{{- $worker := eq (index . 1) "worker" -}}
{{- with index . 0 -}}
{{- $delivery := .Values.embedder.modelDelivery -}}
{{- if and $worker (eq $delivery.mode "hub") }}
# the download cache (modelDelivery.mode hub); nothing is baked here (an image bakes its weights at modelDelivery.imagePath)
- name: model-cache
  mountPath: /home/ray/.cache/huggingface
{{- else if and $worker (eq $delivery.mode "volume") }}
- name: model-store
  mountPath: {{ $delivery.mountPath }}
  readOnly: true
{{- end }}
- name: dshm
  mountPath: /dev/shm
{{- if include "mcp-classifier.categories.enabled" . }}
- name: categories
  mountPath: {{ include "mcp-classifier.categoriesDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.classifiers }}
{{ include "mcp-classifier.classifiers.volumeMount" . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* include (list $ SHM-SIZE "head"|"worker") */}}
{{- define "mcp-classifier.ray.volumes" -}}
{{- $shm := index . 1 -}}
{{- $worker := eq (index . 2) "worker" -}}
{{- with index . 0 -}}
{{- $delivery := .Values.embedder.modelDelivery -}}
{{- if and $worker (eq $delivery.mode "hub") }}
- name: model-cache
  emptyDir:
    sizeLimit: {{ .Values.embedder.modelCacheSizeLimit }}
{{- else if and $worker (eq $delivery.mode "volume") }}
- name: model-store
  {{- toYaml $delivery.volume | nindent 2 }}
{{- end }}
- name: dshm
  emptyDir:
    medium: Memory
    sizeLimit: {{ $shm }}
{{- if include "mcp-classifier.categories.enabled" . }}
- name: categories
  configMap:
    name: {{ include "mcp-classifier.categories.configMapName" . }}
    items:
      - key: {{ include "mcp-classifier.categories.configMapKey" . }}
        path: categories.yaml
{{- end }}
{{- if .Values.classifiers }}
{{ include "mcp-classifier.classifiers.volume" . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* No checksum of the categories file nor of the classifiers' files here: every replica watches its mounted copies and
reloads them in place, so an edit changes nothing of the RayService and starts no new cluster
(tests/integration/test_helm_chart.py and test_chart_production.py check it). */}}
{{- define "mcp-classifier.ray.podMetadata" -}}
labels:
  {{- include "mcp-classifier.labels" (list . "embedder") | nindent 2 }}
{{- end -}}
