# Mistakes in the mcp block, one per line.
mcp {
  listen          = "10.0.0.1:80"
  allowed_origins = ["app.example.com", "https://ok.example.com", "https://x.example.com/path"]
  tokens = [
    { token = "", tenant = "acme" },
    { token = env("CEXEC_TEST_TOKEN"), tenant = "Not Valid" },
    { token = env("CEXEC_TEST_TOKEN"), tenant = "acme" },
    { token = env("CEXEC_TEST_TOKEN"), tenant = "beta" },
  ]
  read_header_timeout      = "10"
  idle_timeout             = "-1s"
  max_connections          = 0
  max_connections_per_peer = 1.5
  max_request_body         = "4 megs"
  max_sessions_per_tenant  = "many"
}
