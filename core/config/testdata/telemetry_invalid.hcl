# Mistakes in the telemetry block, one per line.
telemetry {
  traces {
    endpoint     = "collector"
    protocol     = "zipkin"
    sample_ratio = 1.5
    insecure     = "maybe"
    headers      = { "bad name" = "x" }
  }
}
