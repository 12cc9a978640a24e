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

{{- define "mcp-classifier.ray.volumeMounts" -}}
- name: model-cache
  mountPath: /home/ray/.cache/huggingface
- name: dshm
  mountPath: /dev/shm
{{- if include "mcp-classifier.categories.enabled" . }}
- name: categories
  mountPath: {{ include "mcp-classifier.categoriesDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{- define "mcp-classifier.ray.volumes" -}}
{{- $shm := index . 1 -}}
{{- with index . 0 -}}
- name: model-cache
  emptyDir:
    sizeLimit: {{ .Values.embedder.modelCacheSizeLimit }}
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
{{- end }}
{{- end -}}

{{- define "mcp-classifier.ray.podMetadata" -}}
labels:
  {{- include "mcp-classifier.labels" (list . "embedder") | nindent 2 }}
{{- if .Values.categories.content }}
annotations:
  # a new categories file rolls a new Ray cluster (RayService zero-downtime upgrade)
  checksum/categories: {{ .Values.categories.content | sha256sum }}
{{- end }}
{{- end -}}
