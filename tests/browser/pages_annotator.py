"""The pages an annotator or study participant sees, by URL name: the accessibility walk
(tests/browser/test_accessibility_annotator.py) visits each of them at 390 px and 1440 px in
every state it lists, and fails when one of these names was never visited. A URL name that is
in no list of tests/browser/pages_*.py fails tests/test_page_registry.py, so a new page
cannot be missed."""

from __future__ import annotations

#: url name -> what the walk does there
ANNOTATOR_PAGES: dict[str, str] = {}
