plugin "sandbox" "bwrap" {}

# Running code without a PII guard, on purpose: a warning at every start.
pipeline {
  guards = []
}
