plugin "sandbox" "bwrap" {}

# bin/cexec-plugin-guard-escape is a symlink to a file outside plugin_dir.
plugin "guard" "escape" {}

plugin "codegen" "dotdot" {
  command = "../cexec-plugin-codegen-dotdot"
}

plugin "selector" "abs" {
  command = "/usr/bin/env"
}
