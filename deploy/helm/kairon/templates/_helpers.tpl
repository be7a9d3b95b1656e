{{- define "kairon.labels" -}}
app.kubernetes.io/part-of: kairon
{{- end }}
