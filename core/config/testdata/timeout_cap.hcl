# An execution timeout past what the sandbox runtime can wait (at most 24h).
sandbox {
  limits {
    timeout = "25h"
  }
}
