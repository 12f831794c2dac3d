{{/* Chart name. */}}
{{- define "mcc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-chart, unless overridden. */}}
{{- define "mcc.fullname" -}}
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

{{- define "mcc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mcc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mcc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcc.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mcc.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "mcc.leaderElect" -}}
{{- if or .Values.controller.leaderElect (gt (int .Values.replicaCount) 1) }}true{{ else }}false{{ end }}
{{- end }}

{{/* The daemon's resource names. */}}
{{- define "mcc.daemonName" -}}
{{- printf "%s-daemon" (include "mcc.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcc.daemonSelectorLabels" -}}
app.kubernetes.io/name: {{ include "mcc.name" . }}-daemon
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcc.daemonServiceAccountName" -}}
{{- if .Values.daemon.serviceAccount.create }}
{{- default (include "mcc.daemonName" .) .Values.daemon.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.daemon.serviceAccount.name }}
{{- end }}
{{- end }}
