{{/* Pieces of the chart's two Redis pods (the cache's and the GCS's). */}}

{{- define "mcp-classifier.redis.podSecurityContext" -}}
# the redis user and group of the official alpine image
runAsNonRoot: true
runAsUser: 999
runAsGroup: 1000
fsGroup: 1000
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "mcp-classifier.redis.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* redis-server with its password in a config file written from the mounted Secret at start (a memory emptyDir,
mode 600): never on a command line, nor in the container's environment. include (list PORT EXTRA-ARGS) */}}
{{- define "mcp-classifier.redis.serverCommand" -}}
command: ["/bin/sh", "-c"]
args:
  - |
    umask 077
    printf 'requirepass "%s"\n' "$(cat /etc/redis/auth/password)" > /run/redis/auth.conf
    exec redis-server /run/redis/auth.conf "$@"
  - redis-server
  - --port
  - {{ index . 0 | quote }}
  {{- range index . 1 }}
  - {{ . | quote }}
  {{- end }}
{{- end -}}

{{- define "mcp-classifier.redis.probes" -}}
livenessProbe:
  tcpSocket:
    port: redis
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  exec:
    command: ["/bin/sh", "-c", "REDISCLI_AUTH=\"$(cat /etc/redis/auth/password)\" redis-cli -p {{ . }} ping | grep -q PONG"]
  periodSeconds: 5
  timeoutSeconds: 2
{{- end -}}

{{- define "mcp-classifier.redis.authMounts" -}}
- name: auth
  mountPath: /etc/redis/auth
  readOnly: true
- name: run
  mountPath: /run/redis
{{- end -}}

{{/* include (list SECRET-NAME SECRET-KEY) */}}
{{- define "mcp-classifier.redis.authVolumes" -}}
- name: auth
  secret:
    secretName: {{ index . 0 }}
    defaultMode: 0440
    items:
      - key: {{ index . 1 }}
        path: password
- name: run
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
{{- end -}}
