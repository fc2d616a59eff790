{{/*
Names and labels, one definition each (Helm's conventions).
*/}}

{{/* The chart's name, or nameOverride. */}}
{{- define "dovetail.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: fullnameOverride, else the release name when it already holds
the chart's name (release `dovetail` gives `dovetail`, the kustomize base's prefix), else
<release>-<chart>. Short enough for the longest suffix (-nodeclaims) to stay within 63.
*/}}
{{- define "dovetail.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The forwarder's objects (Deployment, Service, webhook configuration, its RBAC). */}}
{{- define "dovetail.forwarder.fullname" -}}
{{- printf "%s-forwarder" (include "dovetail.fullname" .) }}
{{- end }}

{{- define "dovetail.forwarder.serviceAccountName" -}}
{{- if .Values.forwarder.serviceAccount.create }}
{{- default (include "dovetail.forwarder.fullname" .) .Values.forwarder.serviceAccount.name }}
{{- else }}
{{- required "forwarder.serviceAccount.name: the existing ServiceAccount to use when forwarder.serviceAccount.create is false" .Values.forwarder.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dovetail.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "dovetail.labels" -}}
helm.sh/chart: {{ include "dovetail.chart" . }}
app.kubernetes.io/name: {{ include "dovetail.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dovetail
{{- end }}

{{/* What selects the forwarder's pods (Deployment, Service, PodDisruptionBudget, ServiceMonitor). */}}
{{- define "dovetail.forwarder.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dovetail.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: forwarder
{{- end }}

{{/* Labels of the forwarder's objects. */}}
{{- define "dovetail.forwarder.labels" -}}
{{ include "dovetail.labels" . }}
app.kubernetes.io/component: forwarder
{{- end }}

{{- define "dovetail.forwarder.image" -}}
{{- printf "%s:%s" .Values.forwarder.image.repository (default .Chart.AppVersion .Values.forwarder.image.tag) }}
{{- end }}
