{{/* The release's full name: the release's, or release-chart when it does not say the chart. */}}
{{- define "agents.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "agents.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "agents.labels" -}}
{{ include "agents.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "agents.serviceAccountName" -}}
{{- default (include "agents.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The Secret holding the inbound endpoint's token, if any. */}}
{{- define "agents.inboundSecret" -}}
{{- if .Values.inbound.existingSecret -}}
{{- .Values.inbound.existingSecret -}}
{{- else if .Values.inbound.token -}}
{{- printf "%s-inbound" (include "agents.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the inbound endpoint's certificate (tls.crt, tls.key) and its CA (ca.crt). */}}
{{- define "agents.inboundTLSSecret" -}}
{{- default (printf "%s-inbound-cert" (include "agents.fullname" .)) .Values.inbound.tls.existingSecret -}}
{{- end -}}

{{/* The namespaces POST /runs may make runs in besides the default one (comma-separated). */}}
{{- define "agents.inboundNamespaces" -}}
{{- join "," (default .Values.watchNamespaces .Values.inbound.namespaces) -}}
{{- end -}}
