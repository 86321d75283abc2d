# Every block, every attribute, nothing wrong.
cexec {
  data_dir   = "./state"
  socket     = "run/cexecd.sock"
  log_level  = "debug"
}

plugin "sandbox" "bwrap" {
  args     = ["--verbose"]
  timeout  = "10s"
  env = {
    LANG = "C.UTF-8"
  }
}

plugin "selector" "embeddings" {
  required = false
  model    = "text-embedding-3-small"
  api_key  = env("CEXEC_TEST_API_KEY")
}

plugin "guard" "pii" {}
plugin "codegen" "rules" {}
plugin "codegen" "llm" {}

pipeline {
  selector     = "embeddings"
  codegen      = ["llm", "rules"]
  guards       = ["pii"]
  max_repairs  = 3
  search_limit = 5
  max_inline_attachment = "256KiB"
}

sandbox {
  backend = "bwrap"
  network = true
  session_interpreter = true
  pool {
    warm         = 1
    max_total    = 4
    idle_timeout = "90s"
    max_uses     = 10
    queue_timeout = "5s"
  }
  limits {
    memory  = "512MiB"
    pids    = 64
    timeout = "1m"
    output  = "64KiB"
    tmp     = "1GB"
    max_result_size = "8MiB"
  }
}

mcp_server "filesystem" {
  command  = "npx"
  args     = ["-y", "@modelcontextprotocol/server-filesystem", "./data"]
  cwd      = "work"
  env      = { NODE_ENV = "production" }
  optional = true
}

mcp_server "remote" {
  url     = "https://mcp.example.com/sse"
  headers = { Authorization = "Bearer ${env("CEXEC_TEST_API_KEY")}" }
  timeout = "2m"
  max_argument_size = "4KiB"
}

mcp_server "streamable" {
  url       = "http://127.0.0.1:8080/mcp"
  transport = "http"
}

tenant "acme" {
  disk_quota      = "1GiB"
  max_session_log = "16MiB"
  max_concurrent  = 2
  allowed_servers = ["filesystem"]
  policy {
    deny_tools = ["filesystem/write_file"]
  }
}

tenant "default" {}
