"""The red-team suite, one module per attack surface; the harness is redteam/harness.py."""
