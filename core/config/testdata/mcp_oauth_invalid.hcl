# Mistakes in the oauth block, one per line.
mcp {
  listen = "0.0.0.0:8443"
  oauth {
    issuer          = "http://login.example.com"
    jwks_url        = "https://login.example.com/keys#main"
    audience        = "/mcp"
    tenant_claim    = ""
    required_scopes = ["mcp", "two words"]
  }
}
