# An unknown store kind, and postgres settings on the files store.
store {
  kind = "redis"
}
