"""Clients for the tests: a REST API client signed in with a user's token."""

from __future__ import annotations

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def token_client(user=None, *, client_class=APIClient, **options) -> APIClient:
    """An API client sending `Authorization: Token <key>` of `user` (made on first use);
    anonymous without a user. `options` go to the client (raise_request_exception=...)."""
    client = client_class(**options)
    if user is not None:
        key = Token.objects.get_or_create(user=user)[0].key
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client
