{{/* Name of the chart, overridable. */}}
{{- define "lightning-store.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's resources, at most 63 characters. */}}
{{- define "lightning-store.fullname" -}}
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

{{- define "lightning-store.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "lightning-store.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lightning-store.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "lightning-store.labels" -}}
helm.sh/chart: {{ include "lightning-store.chart" . }}
{{ include "lightning-store.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: server
{{- end }}

{{- /*
Labels of the namespaces Job and its pod: without the selector labels, so that
the Service, the PodDisruptionBudget and the NetworkPolicy of the server pods
never select it.
*/}}
{{- define "lightning-store.jobLabels" -}}
helm.sh/chart: {{ include "lightning-store.chart" . }}
app.kubernetes.io/part-of: {{ include "lightning-store.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: namespaces
{{- end }}

{{- define "lightning-store.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lightning-store.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "lightning-store.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Name and key of the Secret holding the PostgreSQL URL. */}}
{{- define "lightning-store.postgresSecretName" -}}
{{- default (printf "%s-postgres" (include "lightning-store.fullname" .)) .Values.postgres.existingSecret }}
{{- end }}

{{/* Name of the Secret holding the tokens file. */}}
{{- define "lightning-store.tokensSecretName" -}}
{{- default (printf "%s-tokens" (include "lightning-store.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{/* Path of the SQLite database file. */}}
{{- define "lightning-store.databasePath" -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.sqlite.dataDir) .Values.sqlite.fileName }}
{{- end }}

{{/*
Seconds between SIGTERM and SIGKILL: above the preStop sleep plus the drain
deadline, so the server always finishes its own drain.
*/}}
{{- define "lightning-store.terminationGracePeriodSeconds" -}}
{{- $floor := add (int .Values.preStopSleepSeconds) (int (ceil .Values.server.drainTimeoutSecs)) }}
{{- if kindIs "invalid" .Values.terminationGracePeriodSeconds }}
{{- add $floor 15 }}
{{- else if le (int .Values.terminationGracePeriodSeconds) (int $floor) }}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed preStopSleepSeconds + server.drainTimeoutSecs (%v)" .Values.terminationGracePeriodSeconds $floor) }}
{{- else }}
{{- int .Values.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/* Checks values that the schema cannot express. */}}
{{- define "lightning-store.validate" -}}
{{- if and (eq .Values.mode "postgres") (not .Values.postgres.existingSecret) (not .Values.postgres.url) }}
{{- fail "mode postgres needs postgres.existingSecret (recommended) or postgres.url" }}
{{- end }}
{{- end }}

{{/* namespaces.create fits in namespaces.max (with `default`), and names each namespace once. */}}
{{- define "lightning-store.validateNamespaces" -}}
{{- $names := list }}
{{- range .Values.namespaces.create }}
{{- if kindIs "string" . }}
{{- $names = append $names . }}
{{- else }}
{{- $names = append $names .name }}
{{- end }}
{{- end }}
{{- if ne (len $names) (len (uniq $names)) }}
{{- fail (printf "namespaces.create names a namespace twice: %s" (join ", " $names)) }}
{{- end }}
{{- if gt (add1 (len $names)) (int .Values.namespaces.max) }}
{{- fail (printf "namespaces.create has %d namespaces: with default, more than namespaces.max (%d)" (len $names) (int .Values.namespaces.max)) }}
{{- end }}
{{- end }}

{{/* The pod template shared by the StatefulSet (sqlite) and the Deployment (postgres). */}}
{{- define "lightning-store.podTemplate" -}}
metadata:
  labels:
    {{- include "lightning-store.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "lightning-store.serviceAccountName" . }}
  automountServiceAccountToken: {{ .Values.serviceAccount.automountServiceAccountToken }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  terminationGracePeriodSeconds: {{ include "lightning-store.terminationGracePeriodSeconds" . }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: lightning-store
      image: {{ include "lightning-store.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["serve"]
      envFrom:
        - configMapRef:
            name: {{ include "lightning-store.fullname" . }}
      env:
        # The pod's name names the server in worker session records: a
        # StatefulSet pod restarted under its name drops its old sessions at once.
        - name: LIGHTNING_STORE_SERVER_ID
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- if not .Values.auth.insecure }}
        - name: LIGHTNING_STORE_TOKENS_FILE
          value: /etc/lightning-store/tokens/{{ .Values.auth.secretKey }}
        {{- end }}
        {{- if .Values.tls.secretName }}
        - name: LIGHTNING_STORE_TLS_CERT
          value: /etc/lightning-store/tls/tls.crt
        - name: LIGHTNING_STORE_TLS_KEY
          value: /etc/lightning-store/tls/tls.key
        {{- if .Values.tls.clientAuth }}
        - name: LIGHTNING_STORE_TLS_CLIENT_CA
          value: /etc/lightning-store/tls/ca.crt
        {{- end }}
        {{- end }}
        {{- if eq .Values.mode "postgres" }}
        - name: LIGHTNING_STORE_DATABASE_URL
          valueFrom:
            secretKeyRef:
              name: {{ include "lightning-store.postgresSecretName" . }}
              key: {{ .Values.postgres.secretKey }}
      {{- end }}
      ports:
        - name: grpc
          containerPort: {{ .Values.server.grpcPort }}
          protocol: TCP
        {{- if .Values.metrics.enabled }}
        - name: metrics
          containerPort: {{ .Values.server.metricsPort }}
          protocol: TCP
        {{- end }}
      startupProbe:
        {{- if .Values.tls.secretName }}
        httpGet:
          scheme: HTTPS
          path: /healthz
          port: {{ .Values.server.grpcPort }}
        {{- else }}
        grpc:
          port: {{ .Values.server.grpcPort }}
        {{- end }}
        periodSeconds: {{ .Values.probes.startup.periodSeconds }}
        failureThreshold: {{ .Values.probes.startup.failureThreshold }}
      livenessProbe:
        {{- if .Values.tls.secretName }}
        httpGet:
          scheme: HTTPS
          path: /healthz
          port: {{ .Values.server.grpcPort }}
        {{- else }}
        grpc:
          port: {{ .Values.server.grpcPort }}
          service: liveness
        {{- end }}
        periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
        timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
        failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
      readinessProbe:
        {{- if .Values.tls.secretName }}
        httpGet:
          scheme: HTTPS
          path: /healthz
          port: {{ .Values.server.grpcPort }}
        {{- else }}
        grpc:
          port: {{ .Values.server.grpcPort }}
          service: lightningstore.v1.LightningStoreService
        {{- end }}
        periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
        timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
        failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
      {{- if gt (int .Values.preStopSleepSeconds) 0 }}
      lifecycle:
        preStop:
          sleep:
            seconds: {{ int .Values.preStopSleepSeconds }}
      {{- end }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if not .Values.auth.insecure }}
        - name: tokens
          mountPath: /etc/lightning-store/tokens
          readOnly: true
        {{- end }}
        {{- if .Values.tls.secretName }}
        - name: tls
          mountPath: /etc/lightning-store/tls
          readOnly: true
        {{- end }}
        {{- if eq .Values.mode "sqlite" }}
        - name: data
          mountPath: {{ .Values.sqlite.dataDir }}
        {{- end }}
  volumes:
    # The root filesystem is read-only; SQLite and the runtime may need scratch space.
    - name: tmp
      emptyDir:
        sizeLimit: 256Mi
    {{- if not .Values.auth.insecure }}
    # Mounted as a directory (no subPath), so that Secret updates reach the
    # server, which re-reads the file.
    - name: tokens
      secret:
        secretName: {{ include "lightning-store.tokensSecretName" . }}
        items:
          - key: {{ .Values.auth.secretKey }}
            path: {{ .Values.auth.secretKey }}
    {{- end }}
    {{- if .Values.tls.secretName }}
    - name: tls
      secret:
        secretName: {{ .Values.tls.secretName }}
    {{- end }}
    {{- if and (eq .Values.mode "sqlite") (not .Values.sqlite.persistence.enabled) }}
    - name: data
      emptyDir: {}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
