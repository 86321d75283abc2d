plugin "sandbox" "bwrap" {
  env = {
    TOKEN = env("CEXEC_TEST_TOKEN")
    HOME  = env("CEXEC_TEST_UNSET_HOME", "/nonexistent")
  }
}

mcp_server "github" {
  url = "https://api.example.com/mcp"
  headers = {
    Authorization = "Bearer ${env("CEXEC_TEST_UNSET")}"
  }
}

tenant "acme" {
  disk_quota = env()
}

plugin "guard" "pii" {}
