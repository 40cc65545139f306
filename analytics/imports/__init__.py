"""Imports of long-format scores made elsewhere (docs/IMPORT_FORMATS.md): the parsers
(parsers.py: pure), the staged import (services.py), the background job (jobs.py), and the
upload page (views.py, forms.py) and API (apis.py)."""
