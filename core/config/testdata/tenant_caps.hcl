# Per-session caps in tenant blocks: sizes need a unit.
tenant "acme" {
  max_session_log = "16MiB"
}

tenant "bare" {
  max_session_log = 4096
}

tenant "words" {
  max_session_log = "plenty"
}
