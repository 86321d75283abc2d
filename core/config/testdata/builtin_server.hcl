# Built-in servers: every mistake on its own line.
mcp_server "forms" {
  transport = "builtin"
}
mcp_server "pdf" {
  transport = "builtin"
}
mcp_server "forms2" {
  transport = "builtin"
  command   = "forms"
}
mcp_server "forms3" {
  transport = "builtin"
  scope     = "shared"
}
