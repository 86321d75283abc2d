plugin "sandbox" "bwrap" {}

tenant "acme" {
  disk_quota     = "1GiB"
  max_concurrent = 4
}

tenant "../etc" {}

tenant "Acme Corp" {}

tenant "acme" {}

tenant "this-tenant-id-is-far-too-long-to-be-a-directory-name-under-data-dir" {}

plugin "guard" "pii" {}
