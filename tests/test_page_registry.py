"""Every URL that is not the API or Django's admin is listed exactly once: as an annotator
page, a staff page (both walked by the accessibility checks) or not a page (with a reason).
A new view fails here until it is placed, so the accessibility walks cannot miss it."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, get_resolver

from tests.browser.pages_annotator import ANNOTATOR_PAGES
from tests.browser.pages_staff import NOT_PAGES, STAFF_PAGES


def _names(resolver: URLResolver, prefix: str = "", namespace: str | None = None):
    for p in resolver.url_patterns:
        if isinstance(p, URLResolver):
            yield from _names(p, prefix + str(p.pattern), p.namespace or namespace)
        elif isinstance(p, URLPattern):
            route = prefix + str(p.pattern)
            if route.startswith(("api/", "admin/")) or not p.name:
                continue
            yield f"{namespace}:{p.name}" if namespace else p.name


def site_page_names() -> set[str]:
    return set(_names(get_resolver()))


def test_every_url_is_placed_once():
    lists = {"ANNOTATOR_PAGES": ANNOTATOR_PAGES, "STAFF_PAGES": STAFF_PAGES, "NOT_PAGES": NOT_PAGES}
    names = site_page_names()
    unplaced = sorted(n for n in names if not any(n in lst for lst in lists.values()))
    assert not unplaced, f"URLs in no list of tests/browser/pages_*.py: {unplaced}"
    twice = sorted(n for n in names if sum(n in lst for lst in lists.values()) > 1)
    assert not twice, f"URLs in more than one list: {twice}"
    stale = sorted(n for lst in lists.values() for n in lst if n not in names)
    assert not stale, f"listed names that are no URL: {stale}"


def test_no_page_goes_without_a_reason():
    assert all(reason.strip() for reason in NOT_PAGES.values())
