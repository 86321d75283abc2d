plugin "sandbox" "bwrap" {
  required = "maybe"
  args     = "--verbose"
}

pipeline {
  max_repairs = "twice"
}

sandbox {
  network = ["no"]
  session_interpreter = "sometimes"
  pool {
    warm = 2.5
  }
}

plugin "guard" "pii" {}
