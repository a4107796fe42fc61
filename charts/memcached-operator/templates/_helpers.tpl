{{/*
The base of every object name: with the release named memcached-operator,
the names of artifacts/, which the operator's flag defaults match.
*/}}
{{- define "memcached-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
The base of the names of cluster-scoped objects. A namespaced release adds
its namespace, so that one release per namespace, each with the same
release name, can share a cluster.
*/}}
{{- define "memcached-operator.clusterName" -}}
{{- if .Values.watchNamespaces -}}
{{- printf "%s-%s" (include "memcached-operator.fullname" .) .Release.Namespace -}}
{{- else -}}
{{- include "memcached-operator.fullname" . -}}
{{- end -}}
{{- end -}}

{{/*
The selector of the operator's Pods: exactly artifacts/' selector, so that
a release can take over the objects of a kustomize install, whose
Deployment selector cannot change.
*/}}
{{- define "memcached-operator.selectorLabels" -}}
app.kubernetes.io/name: memcached-operator
{{- end -}}

{{/*
The labels Helm's conventions add, on every object: the one difference
between a release and artifacts/ the drift test allows.
*/}}
{{- define "memcached-operator.helmLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "memcached-operator.labels" -}}
{{ include "memcached-operator.selectorLabels" . }}
{{ include "memcached-operator.helmLabels" . }}
{{- end -}}

{{/* Whether this release serves the conversion webhook. */}}
{{- define "memcached-operator.webhookServed" -}}
{{- if and .Values.webhook.enabled (not .Values.watchNamespaces) -}}true{{- end -}}
{{- end -}}

{{/* Whether the secure metrics listener asks the apiserver for reviews. */}}
{{- define "memcached-operator.metricsAuth" -}}
{{- if and .Values.metrics.enabled .Values.metrics.secure -}}true{{- end -}}
{{- end -}}

{{- define "memcached-operator.webhookService" -}}
{{- include "memcached-operator.fullname" . }}-webhook
{{- end -}}

{{- define "memcached-operator.webhookSecret" -}}
{{- include "memcached-operator.fullname" . }}-webhook-cert
{{- end -}}

{{- define "memcached-operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/*
The rules of the controller, cluster-wide or in one namespace: what it
reads, the children it writes, and its Events. Why each verb:
artifacts/rbac/cluster_role.yaml.
*/}}
{{- define "memcached-operator.controllerRules" -}}
- apiGroups: ["cache.kubelite.io"]
  resources: ["memcacheds"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["cache.kubelite.io"]
  resources: ["memcacheds/status"]
  verbs: ["update"]
- apiGroups: ["cache.kubelite.io"]
  resources: ["memcacheds/finalizers"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "list", "watch", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["list", "watch"]
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/* The Lease of leader election. */}}
{{- define "memcached-operator.leaseRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "list", "watch", "create", "update"]
{{- end -}}

{{/* Fails the render on values that cannot work together. */}}
{{- define "memcached-operator.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicas above 1 need leaderElection.enabled: without it every replica reconciles every Memcached" -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled (include "memcached-operator.webhookServed" .) (not .Values.networkPolicy.apiserverCIDRs) -}}
{{- fail "networkPolicy.enabled needs networkPolicy.apiserverCIDRs, the apiserver's source addresses: without them the apiserver cannot reach the conversion webhook" -}}
{{- end -}}
{{- end -}}
