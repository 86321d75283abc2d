# Remote sign-in: JWT access tokens of an identity provider on all interfaces.
mcp {
  listen = "0.0.0.0:8443"
  oauth {
    issuer          = "https://login.example.com/realms/cexec"
    audience        = "https://mcp.example.com/mcp"
    tenant_claim    = "cexec_tenant"
    required_scopes = ["mcp", "cexec:run"]
  }
}
