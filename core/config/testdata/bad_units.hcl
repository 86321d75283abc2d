plugin "sandbox" "bwrap" {
  timeout = "30"
}

sandbox {
  pool {
    idle_timeout = "-5m"
  }
  limits {
    memory  = "256XB"
    timeout = "soon"
    output  = "1.5B"
    tmp     = 0
  }
}

mcp_server "memory" {
  command = "npx"
  timeout = "1 minute"
}

plugin "guard" "pii" {}

pipeline {
  max_inline_attachment = "lots"
}
