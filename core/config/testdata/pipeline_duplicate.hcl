plugin "sandbox" "bwrap" {}
plugin "guard" "pii" {}
plugin "codegen" "rules" {}
plugin "codegen" "llm" {}

pipeline {
  codegen = ["rules", "llm", "rules"]
  guards = [
    "pii",
    "pii",
  ]
}
