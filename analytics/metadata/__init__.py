"""Agreement of proposed with verified metadata: page, CSV export and API
(docs/METADATA.md)."""
