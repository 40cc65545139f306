"""Metadata runs: the page that starts one, its progress page and its API
(docs/METADATA.md)."""
