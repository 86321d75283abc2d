# Sizes without a unit: each is refused with the string to write instead.
sandbox {
  limits {
    memory = 256
    output = "1024"
    tmp    = 64
  }
}

tenant "acme" {
  disk_quota = 1
}
