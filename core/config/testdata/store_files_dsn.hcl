# postgres settings on the default files store.
store {
  dsn       = env("CEXEC_TEST_TOKEN")
  vault_key = env("CEXEC_TEST_TOKEN")
}
