# Disk limits too small for a tenant to run, and the smallest that are not.
cexec {
  disk_quota = "1KiB"
  max_files  = 10
}

tenant "tiny" {
  disk_quota = "1023KiB"
  max_files  = 63
}

tenant "smallest" {
  disk_quota = "1MiB"
  max_files  = 64
}
