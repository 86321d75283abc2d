mcp_server "gone" {
  command = "/nonexistent/bin"
}

mcp_server "maybe" {
  command  = "no-such-server"
  optional = true
}

mcp_server "own_path" {
  command = "npx"
  env     = { PATH = "/nonexistent" }
}

mcp_server "found" {
  command = "npx"
}

mcp_server "per_tenant" {
  command = "gh"
  scope   = "tenant"
}

mcp_server "tenant_path" {
  command = "srv"
  scope   = "tenant"
}

tenant "default" {
  mcp_server "tenant_path" {
    env = { PATH = "/nonexistent" }
  }
}
