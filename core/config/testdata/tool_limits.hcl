sandbox {
  limits {
    max_argument_size = "2MiB"
    max_result_size   = "1GiB"
  }
}

mcp_server "memory" {
  command           = "npx"
  max_argument_size = "lots"
  max_result_size   = "4MiB"
}
