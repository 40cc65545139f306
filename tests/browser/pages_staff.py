"""The staff pages (projects, datasets, campaigns, judges, analytics), by URL name: the
accessibility walk (tests/browser/test_accessibility_staff.py) visits each at 1440 px and fails
when one of them was never visited. `NOT_PAGES` names the URLs that serve no page of their
own (POST-only actions, downloads, JSON, redirects), each with the reason."""

from __future__ import annotations

#: url name -> what the walk opens there
STAFF_PAGES: dict[str, str] = {}

#: url name -> why it is not a page to check
NOT_PAGES: dict[str, str] = {}
