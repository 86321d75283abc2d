# OAuth blocks: every mistake on its own line.
mcp_server "local" {
  command = "x"
  oauth {}
}
mcp_server "remote" {
  url = "https://mcp.example.com/mcp"
  oauth {
    client_id                  = "abc"
    client_secret              = "written-here"
    client_metadata_url        = "http://app.example.com/client.json"
    token_endpoint_auth_method = "client_secret_jwt"
    redirect_port              = 70000
    grant                      = "password"
  }
}
mcp_server "m2m" {
  url = "https://mcp.example.com/m2m"
  oauth {
    grant = "client_credentials"
  }
}
mcp_server "jwt" {
  url = "https://mcp.example.com/jwt"
  oauth {
    client_id            = "svc"
    client_assertion_key = env("CEXEC_TEST_TOKEN")
  }
}
mcp_server "ok" {
  url = "https://mcp.example.com/ok"
  oauth {
    client_id     = env("CEXEC_TEST_TOKEN")
    scopes        = ["files:read"]
    redirect_port = 8765
  }
}
