plugin "sandbox" "bwrap" {}

# No command: the default name cexec-plugin-selector-nothere is looked up.
plugin "selector" "nothere" {
  timeout = "10s"
}

plugin "codegen" "llm" {
  command = "codegen-llm-v2"
}

plugin "guard" "optional" {
  required = false
}

plugin "guard" "notexec" {}
