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
}
