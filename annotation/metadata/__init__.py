"""Proposed and verified item metadata: records, the verification page and its API
(docs/METADATA.md)."""
