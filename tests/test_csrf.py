"""CSRF on every state-changing browser request: a signed-in user's POST without the token
is refused on every route of the site — pages, htmx endpoints and the API under session
authentication — before any view runs. Token-authenticated API clients need no CSRF token
(they send no cookie a third-party page could ride on)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db

DUMMY = {"slug": "no-such-project", "pk": "999999", "skill_id": "999999", "int": "999999"}


def _routes(resolver=None, prefix: str = "") -> list[tuple[str, str]]:
    """(name, path) of every URL pattern, with placeholder arguments."""
    out = []
    for entry in (resolver or get_resolver()).url_patterns:
        pattern = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            if pattern.startswith("admin/"):
                continue  # Django's own admin: it is a CSRF-protected app of its own
            out += _routes(entry, pattern)
        elif isinstance(entry, URLPattern):
            path = re.sub(
                r"<(?:(\w+):)?(\w+)>",
                lambda m: DUMMY.get(m.group(2), DUMMY.get(m.group(1) or "", "x")),
                pattern,
            )
            path = path.lstrip("^").rstrip("$")
            out.append((entry.name or pattern, "/" + path))
    return sorted(set(out))


ROUTES = _routes()


def test_the_walk_finds_the_routes_that_change_things():
    paths = {path for _, path in ROUTES}
    assert "/login/" in paths and "/logout/" in paths
    assert any(p.startswith("/api/v1/") for p in paths)
    assert len(ROUTES) > 60


@pytest.mark.parametrize(("name", "path"), ROUTES, ids=[name for name, _ in ROUTES])
def test_a_post_without_the_token_is_refused(name, path, admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    response = client.post(path, {"anything": "1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 403, (path, response.status_code)
    body = response.content.decode(errors="replace")
    assert "CSRF" in body, (path, body[:200])


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize(("name", "path"), ROUTES, ids=[name for name, _ in ROUTES])
def test_other_unsafe_methods_without_the_token_are_refused(name, path, method, admin_user):
    """PATCH and DELETE change things too (the campaign and member APIs): refused without
    the token whether or not the route takes the method, before any view runs."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    response = client.generic(method, path, '{"role": "admin"}', "application/json")
    assert response.status_code == 403, (path, response.status_code)
    body = response.content.decode(errors="replace")
    assert "CSRF" in body, (path, body[:200])


def test_a_post_with_the_token_gets_through(admin_user, project):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    page = client.get(f"/projects/{project.slug}/skills/new/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())[1]
    # the htmx way: the token in the X-CSRFToken header the page's <body hx-headers> sets
    response = client.post(
        f"/projects/{project.slug}/skills/new/", {"name": ""}, HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 200  # the form again, with its errors: not refused


def test_token_clients_need_no_csrf_token(admin_user, project):
    client = Client(enforce_csrf_checks=True)
    key = Token.objects.get_or_create(user=admin_user)[0].key
    response = client.post(
        f"/api/v1/projects/{project.slug}/scores/import/", {}, HTTP_AUTHORIZATION=f"Token {key}"
    )
    assert response.status_code == 400  # validated, not refused for CSRF
