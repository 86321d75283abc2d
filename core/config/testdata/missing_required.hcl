# An upstream server needs either a command (stdio) or a url (http/sse).
mcp_server "filesystem" {
  args     = ["-y", "@modelcontextprotocol/server-filesystem"]
  optional = true
}

mcp_server "both" {
  command = "npx"
  url     = "https://example.com/mcp"
}

plugin "sandbox" "bwrap" {}

plugin "guard" "pii" {}
