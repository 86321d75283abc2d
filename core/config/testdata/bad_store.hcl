# A store block with mistakes, and a replica id that cannot prefix a session.
cexec {
  log_level = "info"
  replica   = "Replica.A"
}

store {
  kind      = "postgres"
  vault_key = "short"
}
