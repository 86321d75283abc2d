# Per-tenant servers: every mistake on its own line.
mcp_server "shared" {
  command = "npx"
  env     = { FILE = "${tenant.dir}/x.jsonl" }
  idle_timeout = "1m"
}
mcp_server "memory" {
  command       = "npx"
  args          = ["--id", tenant.id]
  scope         = "per-tenant"
}
mcp_server "github" {
  command       = "gh"
  cwd           = "/srv/${tenant.nickname}"
  scope         = "tenant"
  idle_timeout  = "soon"
  max_instances = 0
}
mcp_server "remote" {
  url   = "https://mcp.example.com/${tenant.id}"
  scope = "tenant"
}
tenant "acme" {
  mcp_server "nope" {}
  mcp_server "shared" {}
  mcp_server "github" {
    headers = { Authorization = "Bearer x" }
  }
  mcp_server "github" {}
}
