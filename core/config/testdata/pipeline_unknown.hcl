plugin "sandbox" "bwrap" {}
plugin "selector" "embeddings" {}
plugin "guard" "pii" {}
plugin "codegen" "rules" {}

pipeline {
  selector = "bm25"
  codegen  = ["rules", "llm"]
  guards = [
    "pii",
    "secrets",
  ]
}

sandbox {
  backend = "microsandbox"
}
