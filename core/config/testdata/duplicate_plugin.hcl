plugin "sandbox" "bwrap" {}

plugin "guard" "pii" {}

plugin "guard" "pii" {
  required = false
}

mcp_server "memory" {
  command = "npx"
}

mcp_server "memory" {
  command = "node"
}
