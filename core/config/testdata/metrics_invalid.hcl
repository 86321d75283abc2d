# A metrics listener that is no host:port, and audit sizes out of range.
metrics {
  listen = "9464"
}

audit {
  rotate_size = "1KiB"
  keep        = -1
}
