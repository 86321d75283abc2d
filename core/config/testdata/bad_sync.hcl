# A cexec block with a sync policy that does not exist.
cexec {
  log_level = "info"
  sync      = "sometimes"
}
