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

{{/* Values that end up in names, paths and flags are checked here, as far as a
template can, so that a typo fails the install instead of a pod's start; every value
is also quoted where it is written, so one value is one argument whatever it holds
(a newline in a value must never add a flag such as --allow-transfer). */}}
{{- define "clusterset-dns.checks" -}}
{{- if not (has .Values.mode (list "deployment" "daemonset")) -}}
{{- fail (printf "mode must be deployment or daemonset, not %q" .Values.mode) -}}
{{- end -}}
{{- with .Values.nameOverride -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" (toString .)) -}}
{{- fail (printf "nameOverride must be a DNS label (a-z, 0-9, -), not %q" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- range list "replicas" "terminationGracePeriodSeconds" "lameduck" -}}
{{- if not (or (kindIs "float64" (index $.Values .)) (kindIs "int64" (index $.Values .)) (kindIs "int" (index $.Values .))) -}}
{{- fail (printf "%s must be a number, not %q" . (toString (index $.Values .))) -}}
{{- end -}}
{{- end -}}
{{- with .Values.locality.clusterId -}}
{{- $id := toString . -}}
{{- if or (gt (len $id) 253) (not (regexMatch "^[A-Za-z0-9_-]{1,63}(\\.[A-Za-z0-9_-]{1,63})*\\.?$" $id)) -}}
{{- fail (printf "locality.clusterId must be a DNS name (labels of letters, digits, - and _, 1..63 each, 253 in all), not %q" $id) -}}
{{- end -}}
{{- end -}}
{{- range .Values.transfer.allowTransfer -}}
{{- if not (regexMatch "^[0-9A-Fa-f:.]+(/[0-9]{1,3})?$" (toString .)) -}}
{{- fail (printf "transfer.allowTransfer: %q is not a network (CIDR, e.g. 10.0.0.0/8)" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- range .Values.transfer.notify -}}
{{- if not (regexMatch "^(\\[[0-9A-Fa-f:.]+\\]|[0-9A-Fa-f:.]+):[0-9]{1,5}$" (toString .)) -}}
{{- fail (printf "transfer.notify: %q is not IP:PORT" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- with .Values.transfer.journalChanges -}}
{{- if not (and (or (kindIs "float64" .) (kindIs "int64" .) (kindIs "int" .)) (eq (float64 .) (floor .))) -}}
{{- fail (printf "transfer.journalChanges must be a whole number, not %q" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- $key := toString .Values.transfer.tsigKey.secretKey -}}
{{- if or (not (regexMatch "^[-._A-Za-z0-9]+$" $key)) (has $key (list "." "..")) -}}
{{- fail (printf "transfer.tsigKey.secretKey must be a Secret key (letters, digits, -, _, .), not %q" $key) -}}
{{- end -}}
{{- with .Values.transfer.tsigKey.existingSecret -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$" (toString .)) -}}
{{- fail (printf "transfer.tsigKey.existingSecret must be a Secret name, not %q" (toString .)) -}}
{{- end -}}
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
