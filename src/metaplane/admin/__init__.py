"""The operator's tools: the `metaplane` command line (and, later, the HTTP API)."""
