# The body of this plugin is decoded against a schema the plugin declares:
# max_hits (number, required), case_sensitive (bool), stopwords (list(string)).
plugin "selector" "example" {
  case_sensitive = "yes please"
  stopwords      = ["the", "a"]
  stopword       = ["an"]
}
