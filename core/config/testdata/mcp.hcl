# The mcp block with every attribute.
mcp {
  listen          = "0.0.0.0:8443"
  sse             = false
  allowed_origins = ["https://app.example.com", "http://localhost:5173"]
  tokens = [
    { token = env("CEXEC_TEST_TOKEN"), tenant = "acme" },
    { token = "written-in-the-file", tenant = "default" },
  ]
}
