{{/* Names: <release> when it already contains "rt", else <release>-rt. */}}
{{- define "rt.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rt.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "operator") */}}
{{- define "rt.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "rt.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "rt.operatorAddress" -}}
{{- if .Values.injector.controlPlaneAddress -}}
{{- .Values.injector.controlPlaneAddress -}}
{{- else -}}
{{- printf "%s-operator.%s.svc.cluster.local:%d" (include "rt.fullname" .) .Release.Namespace (int .Values.operator.grpcPort) -}}
{{- end -}}
{{- end -}}

{{/* The scheduler replicas' addresses as sidecars take them: one per pod of the headless Service. */}}
{{- define "rt.schedulerAddress" -}}
{{- if .Values.injector.schedulerAddress -}}
{{- .Values.injector.schedulerAddress -}}
{{- else -}}
{{- $name := printf "%s-scheduler" (include "rt.fullname" .) -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.scheduler.replicas) -}}
{{- $addrs = append $addrs (printf "%s-%d.%s.%s.svc.cluster.local:%d" $name $i $name $.Release.Namespace (int $.Values.scheduler.port)) -}}
{{- end -}}
{{- join "," $addrs -}}
{{- end -}}
{{- end -}}

{{/* The placement replicas' addresses as sidecars take them: one per pod of the headless Service. */}}
{{- define "rt.placementAddress" -}}
{{- if .Values.injector.placementAddress -}}
{{- .Values.injector.placementAddress -}}
{{- else -}}
{{- $name := printf "%s-placement" (include "rt.fullname" .) -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.placement.replicas) -}}
{{- $addrs = append $addrs (printf "%s-%d.%s.%s.svc.cluster.local:%d" $name $i $name $.Release.Namespace (int $.Values.placement.port)) -}}
{{- end -}}
{{- join "," $addrs -}}
{{- end -}}
{{- end -}}

{{/* Pod spec fields every control-plane pod shares. */}}
{{- define "rt.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .Values.hostNetwork }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end -}}

{{/* Scheduling fields of one component's values: (include "rt.placement" .Values.operator) */}}
{{- define "rt.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Env of the pods that call the Kubernetes API when kubernetesApi.host is set. */}}
{{- define "rt.kubernetesApiEnv" -}}
{{- if .Values.kubernetesApi.host }}
{{- $port := int .Values.kubernetesApi.port }}
{{- if eq $port 0 }}
{{- $svc := lookup "v1" "Service" "default" "kubernetes" }}
{{- if $svc }}
{{- $port = int (index $svc.spec.ports 0).targetPort }}
{{- else }}
{{- $port = 443 }}
{{- end }}
{{- end }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.kubernetesApi.host | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ $port | quote }}
{{- end }}
{{- end -}}

{{/* A probe's host field, when probeHost is set. */}}
{{- define "rt.probeHost" -}}
{{- with .Values.probeHost }}
host: {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
The serving certificates: one CA, made at install and read back at upgrade (lookup), signing the
injector's and the operator's certificates. Computed once per render and kept in .Values.__rtPki,
so the Secrets and the webhook's caBundle agree. Returns nothing; read (index .Values "__rtPki").
*/}}
{{- define "rt.pki" -}}
{{- if not (hasKey .Values "__rtPki") -}}
{{- $full := include "rt.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $days := int .Values.certificates.validityDays -}}
{{- $ips := .Values.certificates.extraIPs -}}
{{- $caSecret := lookup "v1" "Secret" $ns (printf "%s-ca" $full) -}}
{{- $ca := dict -}}
{{- if $caSecret -}}
{{- $ca = buildCustomCert (index $caSecret.data "tls.crt") (index $caSecret.data "tls.key") -}}
{{- else -}}
{{- $ca = genCA (printf "%s-ca" $full) $days -}}
{{- end -}}
{{- $pki := dict "ca" (dict "cert" $ca.Cert "key" $ca.Key) -}}
{{- range $name := list "injector" "operator" -}}
{{- $svc := printf "%s-%s" $full $name -}}
{{- $dns := concat (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) $.Values.certificates.extraDNSNames -}}
{{- $existing := lookup "v1" "Secret" $ns (printf "%s-tls" $svc) -}}
{{- if and $caSecret $existing -}}
{{- $_ := set $pki $name (dict "cert" (index $existing.data "tls.crt" | b64dec) "key" (index $existing.data "tls.key" | b64dec)) -}}
{{- else -}}
{{- $c := genSignedCert (printf "%s.%s.svc" $svc $ns) $ips $dns $days $ca -}}
{{- $_ := set $pki $name (dict "cert" $c.Cert "key" $c.Key) -}}
{{- end -}}
{{- end -}}
{{- $_ := set .Values "__rtPki" $pki -}}
{{- end -}}
{{- end -}}

{{/*
A pod that is being deleted keeps serving for drainSeconds before its process gets SIGTERM:
kube-proxy and the API server's endpoint view take a moment to drop it, and a webhook call or
sidecar connection routed to it meanwhile would otherwise meet a closed port (with
failurePolicy Ignore, a pod admitted without its sidecar). The kubelet's own sleep action: no
shell in the image is needed. Argument: the component's values.
*/}}
{{- define "rt.drain" -}}
{{- if gt (int .drainSeconds) 0 }}
lifecycle:
  preStop:
    sleep:
      seconds: {{ int .drainSeconds }}
{{- end }}
{{- end -}}

{{/*
Workload identity's PKI (identity.enabled): the signing CA of workload certificates, the trust
bundle sidecars check peers against, and the scheduler's serving certificate signed by that CA
(sidecars verify the scheduler with the trust bundle and its DNS name). Kept across upgrades
with lookup, like rt.pki, in its own Secret <release>-identity-ca. User values win:
identity.ca.certPEM + keyPEM replace the signing CA, identity.ca.trustBundlePEM the bundle (a
root rotation: docs/identity.md). Computed once per render into .Values.__rtIdentity.
*/}}
{{- define "rt.identityPki" -}}
{{- if not (hasKey .Values "__rtIdentity") -}}
{{- $full := include "rt.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $v := .Values.identity.ca -}}
{{- if ne (empty $v.certPEM) (empty $v.keyPEM) -}}
{{- fail "identity.ca.certPEM and identity.ca.keyPEM go together (the signing CA's certificate and its key)" -}}
{{- end -}}
{{- $existing := lookup "v1" "Secret" $ns (printf "%s-identity-ca" $full) -}}
{{- $ca := dict -}}
{{- $bundle := "" -}}
{{- if $v.certPEM -}}
{{- $ca = dict "cert" $v.certPEM "key" $v.keyPEM -}}
{{- $bundle = $v.certPEM -}}
{{- else if $existing -}}
{{- $ca = dict "cert" (index $existing.data "tls.crt" | b64dec) "key" (index $existing.data "tls.key" | b64dec) -}}
{{- $bundle = index $existing.data "ca.crt" | b64dec -}}
{{- else -}}
{{- $gen := genCA (printf "%s-identity-ca" $full) (int .Values.certificates.validityDays) -}}
{{- $ca = dict "cert" $gen.Cert "key" $gen.Key -}}
{{- $bundle = $gen.Cert -}}
{{- end -}}
{{- if $v.trustBundlePEM -}}
{{- $bundle = $v.trustBundlePEM -}}
{{- end -}}
{{- $pki := dict "ca" $ca "bundle" $bundle -}}
{{- /* the serving certificates of the scheduler and of placement, each for its Service and pod names */ -}}
{{- range $component := list "scheduler" "placement" -}}
{{- $svc := index $.Values $component -}}
{{- if $svc.enabled -}}
{{- $name := printf "%s-%s" $full $component -}}
{{- $dns := list $name (printf "%s.%s" $name $ns) (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.cluster.local" $name $ns) -}}
{{- range $i := until (int $svc.replicas) -}}
{{- $dns = append $dns (printf "%s-%d.%s.%s.svc.cluster.local" $name $i $name $ns) -}}
{{- $dns = append $dns (printf "%s-%d.%s.%s.svc" $name $i $name $ns) -}}
{{- end -}}
{{- $dns = concat $dns $.Values.certificates.extraDNSNames -}}
{{- $ips := $.Values.certificates.extraIPs -}}
{{- /* reused while the signer and the names are the same; made again when either changed */ -}}
{{- $stamp := sha256sum (printf "%s|%s|%s" $ca.cert (join "," $dns) (join "," $ips)) -}}
{{- $old := lookup "v1" "Secret" $ns (printf "%s-tls" $name) -}}
{{- if and $old (eq (index ($old.metadata.annotations | default dict) "rt.io/issued-for" | default "") $stamp) -}}
{{- $_ := set $pki $component (dict "cert" (index $old.data "tls.crt" | b64dec) "key" (index $old.data "tls.key" | b64dec) "stamp" $stamp) -}}
{{- else -}}
{{- $signer := buildCustomCert ($ca.cert | b64enc) ($ca.key | b64enc) -}}
{{- $c := genSignedCert (printf "%s.%s.svc" $name $ns) $ips $dns (int $.Values.certificates.validityDays) $signer -}}
{{- $_ := set $pki $component (dict "cert" $c.Cert "key" $c.Key "stamp" $stamp) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $_ := set .Values "__rtIdentity" $pki -}}
{{- end -}}
{{- end -}}
