{{/*
The chart name, possibly overridden.
*/}}
{{- define "mcpfleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fully qualified app name: <release>-<chart>, or the release name if it already contains the chart
name. Truncated to 63 characters (DNS label).
*/}}
{{- define "mcpfleet.fullname" -}}
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

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "mcpfleet.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels.
*/}}
{{- define "mcpfleet.labels" -}}
helm.sh/chart: {{ include "mcpfleet.chart" . }}
{{ include "mcpfleet.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mcpfleet
{{- end }}

{{/*
Selector labels of the operator pod.
*/}}
{{- define "mcpfleet.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpfleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/*
The operator's ServiceAccount name.
*/}}
{{- define "mcpfleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcpfleet.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
An image reference from {repository, tag, digest}; tag defaults to the chart's appVersion, a digest wins.
Usage: include "mcpfleet.image" (dict "image" .Values.image "root" .)
*/}}
{{- define "mcpfleet.image" -}}
{{- $repo := required "image repository is required" .image.repository }}
{{- if .image.digest }}
{{- printf "%s@%s" $repo .image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (toString (default .root.Chart.AppVersion .image.tag)) }}
{{- end }}
{{- end }}

{{/*
MCPFLEET_SIDECAR_IMAGES: service=image,... (services in sorted order).
*/}}
{{- define "mcpfleet.sidecarImages" -}}
{{- $root := . }}
{{- $out := list }}
{{- range $service, $image := .Values.sidecarImages }}
{{- $out = append $out (printf "%s=%s" $service (include "mcpfleet.image" (dict "image" $image "root" $root))) }}
{{- end }}
{{- join "," $out }}
{{- end }}

{{/*
The namespaces the operator watches, as a JSON list (empty when clusterWide).
*/}}
{{- define "mcpfleet.watchNamespaces" -}}
{{- if .Values.clusterWide }}
{{- list | toJson }}
{{- else if .Values.watchNamespaces }}
{{- .Values.watchNamespaces | uniq | toJson }}
{{- else }}
{{- list .Release.Namespace | toJson }}
{{- end }}
{{- end }}

{{/*
The namespaces trial pods run in and that get the trial NetworkPolicy, as a JSON list.
*/}}
{{- define "mcpfleet.trialNamespaces" -}}
{{- if .Values.networkPolicy.namespaces }}
{{- .Values.networkPolicy.namespaces | uniq | toJson }}
{{- else if .Values.clusterWide }}
{{- list .Release.Namespace | toJson }}
{{- else }}
{{- include "mcpfleet.watchNamespaces" . }}
{{- end }}
{{- end }}

{{/*
The labels of trial pods (set by the operator, operator/manifests.py).
*/}}
{{- define "mcpfleet.trialSelector" -}}
app.kubernetes.io/managed-by: mcpfleet
app.kubernetes.io/component: trial
{{- end }}

{{/*
NetworkPolicy ports from a list of numbers (TCP) or {port, protocol, endPort}.
*/}}
{{- define "mcpfleet.netpolPorts" -}}
{{- range . }}
{{- if kindIs "map" . }}
- protocol: {{ default "TCP" .protocol }}
  port: {{ .port }}
  {{- with .endPort }}
  endPort: {{ . }}
  {{- end }}
{{- else }}
- protocol: TCP
  port: {{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/*
An egress rule to {cidr, except, ports}.
*/}}
{{- define "mcpfleet.cidrEgress" -}}
- to:
    - ipBlock:
        cidr: {{ required "networkPolicy endpoints need a cidr" .cidr }}
        {{- with .except }}
        except:
          {{- toYaml . | nindent 10 }}
        {{- end }}
  {{- with .ports }}
  ports:
    {{- include "mcpfleet.netpolPorts" . | trim | nindent 4 }}
  {{- end }}
{{- end }}

{{/*
MCPFLEET_POD_DEFAULTS: trialPods as JSON, only the fields given (an empty value is no default); image pull
secrets given by name become {name}. Empty when none is given.
*/}}
{{- define "mcpfleet.trialPodDefaults" -}}
{{- $out := dict }}
{{- range $key, $value := .Values.trialPods }}
{{- if $value }}
{{- if eq $key "imagePullSecrets" }}
{{- $refs := list }}
{{- range $value }}
{{- $refs = append $refs (kindIs "map" . | ternary . (dict "name" .)) }}
{{- end }}
{{- $_ := set $out $key $refs }}
{{- else }}
{{- $_ := set $out $key $value }}
{{- end }}
{{- end }}
{{- end }}
{{- if $out }}
{{- toJson $out }}
{{- end }}
{{- end }}
