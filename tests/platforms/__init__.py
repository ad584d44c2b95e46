"""Where users are: without fork, older Pythons, private interpreters."""
