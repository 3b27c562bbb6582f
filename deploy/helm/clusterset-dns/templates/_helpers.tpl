{{/* The objects are named like the kustomize overlays' (the CoreDNS and NodeLocal
DNSCache stanzas name the Service kube-system/clusterset-dns): nameOverride, else
the chart's name, whatever the release is called. */}}
{{- define "clusterset-dns.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "clusterset-dns.selectorLabels" -}}
app.kubernetes.io/name: {{ include "clusterset-dns.name" . }}
{{- end -}}

{{- define "clusterset-dns.labels" -}}
{{ include "clusterset-dns.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "clusterset-dns.checks" -}}
{{- if not (has .Values.mode (list "deployment" "daemonset")) -}}
{{- fail (printf "mode must be deployment or daemonset, not %q" .Values.mode) -}}
{{- end -}}
{{- if le (float64 .Values.terminationGracePeriodSeconds) (float64 .Values.lameduck) -}}
{{- fail "terminationGracePeriodSeconds must be above lameduck, or a stopping pod is killed while it still answers" -}}
{{- end -}}
{{- if and .Values.transfer.tsigKey.existingSecret .Values.transfer.tsigKey.value -}}
{{- fail "transfer.tsigKey: give existingSecret or value, not both" -}}
{{- end -}}
{{- end -}}

{{- define "clusterset-dns.tsigSecret" -}}
{{- .Values.transfer.tsigKey.existingSecret | default (printf "%s-tsig" (include "clusterset-dns.name" .)) -}}
{{- end -}}

{{/* "true" or "": include returns text, and "false" would be true in an `if` */}}
{{- define "clusterset-dns.tsig" -}}
{{- if or .Values.transfer.tsigKey.existingSecret .Values.transfer.tsigKey.value }}true{{ end -}}
{{- end -}}

{{- define "clusterset-dns.nodeName" -}}
{{- if and (eq .Values.mode "daemonset") .Values.locality.nodeName }}true{{ end -}}
{{- end -}}

{{- define "clusterset-dns.nodeZone" -}}
{{- if and (eq .Values.mode "daemonset") .Values.locality.topologyZoneFromNode }}true{{ end -}}
{{- end -}}
