"""The annotation API is resolved before the pages (flaskweb/urls.py): its next and submit are
the hot path, and Django tries the root patterns in order."""

from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse


def _routes(patterns, prefix: str = "") -> list[str]:
    found = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            found.extend(_routes(pattern.url_patterns, route))
        elif isinstance(pattern, URLPattern):
            found.append(route)
    return found


def test_the_annotation_api_is_the_first_root_pattern():
    first = get_resolver().url_patterns[0]
    assert str(first.pattern) == "api/v1/annotation/"


def test_hot_path_urls_resolve_after_few_tries():
    for name, kwargs in (
        ("annotation-api:api-assignment-next", {"campaign_id": 1}),
        ("annotation-api:api-assignment-submit", {"assignment_id": 1}),
    ):
        match = resolve(reverse(name, kwargs=kwargs))
        assert match.view_name == name
        assert len(match.tried or []) <= 40, len(match.tried or [])


def test_no_page_pattern_could_match_an_api_path():
    """So putting the API first changes no resolution: every other route starts with a
    literal segment that is not "api" (the API's own routes aside)."""
    resolver = get_resolver()
    for pattern in resolver.url_patterns[1:]:
        for route in _routes([pattern]):
            if route.startswith("api/"):
                continue  # the other APIs, mounted under their own literal prefixes
            assert not route.startswith(("<", "^", "api")), route
