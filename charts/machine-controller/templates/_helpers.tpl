{{/* Chart name. */}}
{{- define "machine-controller.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart, unless overridden. */}}
{{- define "machine-controller.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "machine-controller.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "machine-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ include "machine-controller.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "machine-controller.labels" -}}
helm.sh/chart: {{ include "machine-controller.chart" . }}
{{ include "machine-controller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "machine-controller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "machine-controller.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The control namespace: --namespace of the controller. */}}
{{- define "machine-controller.controlNamespace" -}}
{{- default .Release.Namespace .Values.controlNamespace }}
{{- end }}

{{- define "machine-controller.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The sidecar's image. A provider's image needs its own tag: mcm's appVersion names no release of
it. Only the local provider's sidecar (mcm's own image, or a copy of it under another name)
defaults to the controller image's tag.
*/}}
{{- define "machine-controller.sidecarImage" -}}
{{- $s := .Values.driver.sidecar.image }}
{{- if and $s.repository (not $s.tag) (not .Values.driver.local.enabled) }}
{{- fail (printf "driver.sidecar.image.tag is required: the release of the provider's image %s (mcm's appVersion %s names none of its releases)" $s.repository .Chart.AppVersion) }}
{{- end }}
{{- if $s.repository }}
{{- printf "%s:%s" $s.repository (default .Chart.AppVersion $s.tag) }}
{{- else }}
{{- include "machine-controller.image" . }}
{{- end }}
{{- end }}

{{/* Name of the Secret with the target kubeconfig, empty when the target is in-cluster or none. */}}
{{- define "machine-controller.targetSecret" -}}
{{- if not .Values.targetCluster.none }}
{{- if .Values.targetCluster.existingSecret }}
{{- .Values.targetCluster.existingSecret }}
{{- else if .Values.targetCluster.kubeconfig }}
{{- printf "%s-target-kubeconfig" (include "machine-controller.fullname" .) }}
{{- end }}
{{- end }}
{{- end }}

{{- define "machine-controller.leaderElect" -}}
{{- if or .Values.controller.leaderElect (gt (int .Values.replicaCount) 1) }}true{{ else }}false{{ end }}
{{- end }}

{{/* "true" when the target cluster is the one the chart is installed in (in-cluster config). */}}
{{- define "machine-controller.targetInCluster" -}}
{{- if and (not .Values.targetCluster.none) (not (include "machine-controller.targetSecret" .)) }}true{{ end }}
{{- end }}

{{/*
The driver the user chose: "local" (the demo provider, in process or in the sidecar), "sidecar"
(a provider's sidecar image) or "module" (a driver in the controller image). Fails unless
exactly one was chosen.
*/}}
{{- define "machine-controller.driverKind" -}}
{{- $d := .Values.driver }}
{{- if hasKey $d "inProcess" }}
{{- fail "driver.inProcess is gone: set driver.module (a driver in the controller image), driver.sidecar (a provider's sidecar) or driver.local.enabled=true (the demo provider)" }}
{{- end }}
{{- $chosen := list }}
{{- if $d.local.enabled }}{{ $chosen = append $chosen "driver.local.enabled" }}{{ end }}
{{- if $d.module }}{{ $chosen = append $chosen "driver.module" }}{{ end }}
{{- if and $d.sidecar.enabled (not $d.local.enabled) }}{{ $chosen = append $chosen "driver.sidecar" }}{{ end }}
{{- if eq (len $chosen) 0 }}
{{- fail "choose a driver: driver.sidecar.enabled=true with driver.sidecar.image.repository (a provider's gRPC sidecar), driver.module=MODULE:ATTR (a driver in the controller image), or driver.local.enabled=true (mcm's demo provider, not for real machines)" }}
{{- end }}
{{- if gt (len $chosen) 1 }}
{{- fail (printf "choose one driver, not %s" (join " and " $chosen)) }}
{{- end }}
{{- if and (eq (first $chosen) "driver.sidecar") (not $d.sidecar.image.repository) }}
{{- fail "driver.sidecar.image.repository is required: the provider's sidecar image" }}
{{- end }}
{{- if $d.local.enabled }}local{{ else if $d.module }}module{{ else }}sidecar{{ end }}
{{- end }}

{{/*
"true" when the driver sidecar gets a token of the pod's ServiceAccount: only when values say so
(driver.sidecar.serviceAccountToken). The local provider in the sidecar needs one (its VMs are
ConfigMaps, its Nodes are written through the API): rendering fails unless values say so.
*/}}
{{- define "machine-controller.sidecarToken" -}}
{{- $s := .Values.driver.sidecar }}
{{- if and $s.enabled .Values.driver.local.enabled (not $s.serviceAccountToken) }}
{{- fail "the local provider in the sidecar calls the Kubernetes API as the pod's ServiceAccount: set driver.sidecar.serviceAccountToken=true (a provider's sidecar gets no token)" }}
{{- end }}
{{- if $s.serviceAccountToken }}true{{ end }}
{{- end }}

{{/* The controller's identity in this cluster: its ServiceAccount's user name. */}}
{{- define "machine-controller.serviceAccountUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "machine-controller.serviceAccountName" .) }}
{{- end }}
