# A small but complete config: the default plugins, one upstream server, and
# a tenant whose policy limits what its programs may do. `cexecctl config
# check` reads it without starting anything; cexecd -config would run it.
cexec {
  data_dir   = "./.cexec-example"
  log_level  = "info"
  # Relative paths are relative to this file: the repository's bin/.
  # Secrets and machine-specific paths come from the environment.
  plugin_dir = env("CEXEC_PLUGIN_DIR", "../../../bin")
}

plugin "sandbox" "bwrap" {}
plugin "selector" "embeddings" {}
plugin "guard" "pii" {}

mcp_server "filesystem" {
  command  = "npx"
  args     = ["-y", "@modelcontextprotocol/server-filesystem", "./data"]
  optional = true
}

tenant "acme" {
  disk_quota     = "2GiB"
  max_concurrent = 4
  policy {
    max_tool_calls = 50
    deny           = ["filesystem/move_file"]
    constraint "filesystem/write_file" {
      argument = "path"
      prefix   = "out/"
    }
  }
}
