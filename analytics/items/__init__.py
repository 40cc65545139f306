"""The drill-down page and API: the responses behind a figure (docs/DRILL_DOWN.md)."""
