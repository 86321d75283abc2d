# A range of tenant uids that includes nobody (65534).
cexec {
  log_level   = "info"
  tenant_uids = "60000-70000"
}
