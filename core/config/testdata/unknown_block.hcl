# A block cexec does not know, next to a valid one.
cexec {
  log_level = "debug"
}

frobnicate "x" {
  enabled = true
}

colour = "blue"
