"""Exports of a project's scores as background jobs (docs/EXPORTS.md): options, writer and
job transitions (services.py), score streams and job reads (selectors.py), the exports page
(views.py) and API (apis.py)."""
