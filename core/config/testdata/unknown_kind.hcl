plugin "sandbox" "bwrap" {}

plugin "tokenizer" "bpe" {
  vocab = "gpt2"
}

plugin "guard" "Bad.Name" {}

plugin "guard" {}

plugin "guard" "pii" {}
