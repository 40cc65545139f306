"""Token authentication (flaskweb/api_auth.py): the fast reading of a plain
`Authorization: Token <key>` header answers exactly as DRF's TokenAuthentication, every
other form goes to DRF's own reading, and nothing about tokens or users is cached."""

from __future__ import annotations

import pytest
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.request import Request
from rest_framework.test import APIClient, APIRequestFactory

from flaskweb.api_auth import FastTokenAuthentication

pytestmark = pytest.mark.django_db
PROJECTS = "/api/v1/annotation/projects/"


def _outcome(authentication, header: str | None):
    """What an authentication class makes of a request with this Authorization header:
    None, (user id, token key), or the failure's class and message."""
    extra = {} if header is None else {"HTTP_AUTHORIZATION": header}
    request = Request(APIRequestFactory().get("/", **extra))
    try:
        found = authentication.authenticate(request)
    except exceptions.APIException as exc:
        return type(exc).__name__, str(exc.detail)
    if found is None:
        return None
    user, token = found
    return user.pk, token.key, token.user_id, user.username, user.is_active


def _headers(key: str) -> list[str | None]:
    return [
        None,
        "",
        f"Token {key}",
        f"token {key}",
        f"TOKEN {key}",
        f"Token  {key}",
        f"Token {key} ",
        f" Token {key}",
        f"Token\t{key}",
        f"Token {key}x",
        f"Token {key[:-1]}",
        f"Token {key} extra",
        "Token",
        "Token ",
        "Token unknownkey0000000000000000000000000",
        f"Bearer {key}",
        f"Basic {key}",
        "Token caf\u00e9",
        "Token k\u00a0ey",
        "Token k\x1cey",
        f"Token {key.upper()}",
    ]


def test_every_header_form_is_read_as_drf_reads_it(annotator):
    key = Token.objects.create(user=annotator).key
    for header in _headers(key):
        fast = _outcome(FastTokenAuthentication(), header)
        assert fast == _outcome(TokenAuthentication(), header), header
    assert _outcome(FastTokenAuthentication(), f"Token {key}")[:2] == (annotator.pk, key)


def test_an_inactive_user_is_refused_as_drf_refuses_them(annotator):
    key = Token.objects.create(user=annotator).key
    annotator.is_active = False
    annotator.save(update_fields=["is_active"])
    refused = ("AuthenticationFailed", "User inactive or deleted.")
    assert _outcome(FastTokenAuthentication(), f"Token {key}") == refused
    assert _outcome(TokenAuthentication(), f"Token {key}") == refused


def test_the_plain_header_is_read_without_parsing_every_header(annotator):
    key = Token.objects.create(user=annotator).key
    request = Request(APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Token {key}"))
    user, _ = FastTokenAuthentication().authenticate(request)
    assert user.pk == annotator.pk
    # request.headers is a cached property: DRF's reading would have built it
    assert "headers" not in vars(request._request)


def test_a_deleted_token_or_deactivated_user_stops_working_at_the_next_request(annotator):
    token = Token.objects.create(user=annotator)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert client.get(PROJECTS).status_code == 200
    annotator.is_active = False
    annotator.save(update_fields=["is_active"])
    inactive = client.get(PROJECTS)
    assert inactive.status_code == 401 and inactive.json()["detail"] == "User inactive or deleted."
    annotator.is_active = True
    annotator.save(update_fields=["is_active"])
    assert client.get(PROJECTS).status_code == 200
    token.delete()
    gone = client.get(PROJECTS)
    assert gone.status_code == 401 and gone.json()["detail"] == "Invalid token."
