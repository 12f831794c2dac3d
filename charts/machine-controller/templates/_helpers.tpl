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

{{- define "machine-controller.sidecarImage" -}}
{{- $s := .Values.driver.sidecar.image }}
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
