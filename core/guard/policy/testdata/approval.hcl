tenant "acme" {
  policy {
    approval {
      annotations = ["destructiveHint"]
      timeout     = "90s"
    }
    approval {
      tools = ["payments/*", "mail/send"]
    }
  }
}
