# Traces to a collector over OTLP/HTTP, half of new traces kept.
telemetry {
  traces {
    endpoint     = "https://otel.example.com:4318"
    protocol     = "http"
    sample_ratio = 0.5
    headers      = { "x-api-key" = env("CEXEC_TEST_TOKEN") }
  }
}
