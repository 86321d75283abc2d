tenant "bad" {
  policy {
    strict         = "yes please"
    max_tool_calls = 0
    max_output     = "lots"
    allow          = ["filesystem/*", "", "a/b/c"]
    deny           = ["fs/[x"]
    deny_code      = ["ok", "(unclosed"]
    color          = "blue"

    constraint "filesystem/write_file" {
      argument = "path"
    }
    constraint "payments/transfer" {
      argument = "amount"
      min      = 10
      max      = 5
    }
    constraint "mail/send" {
      argument = "to"
      pattern  = "[z-a]"
    }
    constraint "x/y" {
      prefix = "/tmp/"
    }
    constraint "/nope" {
      argument = "a"
      one_of   = []
    }
    constraint "fs/w" {
      argument = "path"
      prefix   = ""
    }
  }
}
