# Disk limits: daemon-wide defaults, per tenant, per file.
cexec {
  disk_quota = 512
  max_files  = 0
}

sandbox {
  limits {
    max_file_size = "big"
  }
}

tenant "acme" {
  disk_quota = "2MiB"
  max_files  = 1.5
}

tenant "fine" {
  disk_quota = "2MiB"
  max_files  = 10000
}
