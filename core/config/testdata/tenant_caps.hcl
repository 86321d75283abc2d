# Per-session caps in tenant blocks: sizes and durations need a unit.
tenant "acme" {
  max_session_log = "16MiB"
  session_ttl     = "720h"
}

tenant "bare" {
  max_session_log = 4096
  session_ttl     = "30 days"
}

tenant "words" {
  max_session_log = "plenty"
}
