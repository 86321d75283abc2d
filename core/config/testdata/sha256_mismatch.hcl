plugin "sandbox" "bwrap" {
  # Right length, wrong digest.
  sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
}

plugin "guard" "pii" {
  sha256 = "abc123"
}
