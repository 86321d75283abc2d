# A policy using every rule.
tenant "acme" {
  policy {
    strict         = true
    max_tool_calls = 3
    max_output     = "1KiB"

    allow = ["filesystem/*", "memory", "payments/transfer", "mail/send", "cfg/*"]
    deny  = ["memory/delete_*"]

    deny_code = ["\\bsubprocess\\b", "os\\.system"]

    constraint "filesystem/write_file" {
      argument = "path"
      prefix   = "/data/out/"
    }
    constraint "filesystem/*" {
      argument = "paths"
      prefix   = "/data/"
    }
    constraint "payments/transfer" {
      argument = "amount"
      required = true
      min      = 0
      max      = 100
    }
    constraint "mail/send" {
      argument = "to"
      pattern  = "@example\\.com$"
    }
    constraint "cfg/set" {
      argument = "options.mode"
      one_of   = ["read", "write", 7]
    }
  }
}

tenant "open" {}
