tenant "bad" {
  policy {
    approval {
      tools       = ["payments/*", "a/b/c"]
      annotations = ["destructiveHint", "scaryHint"]
      timeout     = "soon"
    }
    approval {
      timeout = "0s"
    }
  }
}
