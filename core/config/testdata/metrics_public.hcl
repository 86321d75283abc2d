# Metrics on every interface: served, with a warning (no auth on /metrics).
metrics {
  listen = "0.0.0.0:9464"
}
