"""The disagreement explorer (docs/DISAGREEMENTS.md): the ranking (disagreement.py: pure),
its reads (selectors.py), the page with the send-back for re-annotation (views.py) and the
API (apis.py)."""
