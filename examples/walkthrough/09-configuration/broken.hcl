cexec {
  log_level = "chatty"
}

sandbox {
  limits {
    memory = "lots"
  }
}
