{{/*
machine-controller-manager: the MachineSet/MachineDeployment manager, in a Deployment of its own
with its own ServiceAccount and RBAC (see the chart README, "MachineSets and MachineDeployments").
*/}}

{{/* Its name label: app.kubernetes.io/name differs from the controller's, so no selector of one
(Deployment, Service, PodDisruptionBudget, NetworkPolicy) matches the other's pods. */}}
{{- define "machine-controller.managerName" -}}
{{- printf "%s-manager" (include "machine-controller.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "machine-controller.managerFullname" -}}
{{- printf "%s-manager" (include "machine-controller.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "machine-controller.managerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "machine-controller.managerName" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "machine-controller.managerLabels" -}}
helm.sh/chart: {{ include "machine-controller.chart" . }}
{{ include "machine-controller.managerSelectorLabels" . }}
app.kubernetes.io/component: manager
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "machine-controller.managerServiceAccountName" -}}
{{- $sa := .Values.manager.serviceAccount }}
{{- if $sa.create }}
{{- default (include "machine-controller.managerFullname" .) $sa.name }}
{{- else }}
{{- default "default" $sa.name }}
{{- end }}
{{- end }}

{{- define "machine-controller.managerImage" -}}
{{- $i := .Values.manager.image }}
{{- printf "%s:%s" (default .Values.image.repository $i.repository) (default (default .Chart.AppVersion .Values.image.tag) $i.tag) }}
{{- end }}

{{- define "machine-controller.managerLeaderElect" -}}
{{- if or .Values.manager.leaderElect (gt (int .Values.manager.replicaCount) 1) }}true{{ else }}false{{ end }}
{{- end }}

{{/* The Secret with the manager's target kubeconfig: its own, else the controller's. */}}
{{- define "machine-controller.managerTargetSecret" -}}
{{- if not .Values.targetCluster.none }}
{{- default (include "machine-controller.targetSecret" .) .Values.manager.targetCluster.existingSecret }}
{{- end }}
{{- end }}

{{- define "machine-controller.managerTargetSecretKey" -}}
{{- if .Values.manager.targetCluster.existingSecret }}
{{- .Values.manager.targetCluster.secretKey }}
{{- else }}
{{- .Values.targetCluster.secretKey }}
{{- end }}
{{- end }}

{{/* "true" when the manager's target cluster is the one the chart is installed in. */}}
{{- define "machine-controller.managerTargetInCluster" -}}
{{- if and (not .Values.targetCluster.none) (not (include "machine-controller.managerTargetSecret" .)) }}true{{ end }}
{{- end }}
