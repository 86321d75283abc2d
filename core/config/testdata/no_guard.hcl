# A sandbox but no guard plugin: refused, with the way out.
plugin "sandbox" "bwrap" {}
