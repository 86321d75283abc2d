plugin "sandbox" "bwrap" {}
plugin "guard" "pii" {}
plugin "guard" "acme" {
  command = "cexec-plugin-guard-pii"
}
plugin "codegen" "rules" {}
plugin "codegen" "llm" {}

pipeline {
  codegen = ["rules"]
  guards  = ["pii"]
}
