"""dig-based conformance suite (see README.md)."""
