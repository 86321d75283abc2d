# The mcp block with every attribute.
mcp {
  listen          = "0.0.0.0:8443"
  sse             = false
  allowed_origins = ["https://app.example.com", "http://localhost:5173"]
  tokens = [
    { token = env("CEXEC_TEST_TOKEN"), tenant = "acme" },
    { token = "written-in-the-file", tenant = "default" },
  ]
  read_header_timeout      = "5s"
  read_timeout             = "1m"
  idle_timeout             = "90s"
  max_connections          = 256
  max_connections_per_peer = 16
  max_request_body         = "1MiB"
  max_sessions_per_tenant  = 8
  session_idle_timeout     = "20m"
}
