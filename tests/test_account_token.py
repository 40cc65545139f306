"""The API token page: any signed-in user creates, rotates and revokes their own token; the
key is shown once; a rotated or revoked key stops working at once; nothing is cached."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db
URL = reverse("account-token")
HX = {"HX-Request": "true"}


def _projects(key: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/v1/annotation/projects/").status_code


def _shown_key(response) -> str:
    match = re.search(r'id="new-token"[^>]*value="([0-9a-f]{40})"', response.content.decode())
    return match[1] if match else ""


def test_a_token_is_made_shown_once_and_works(annotator_client, annotator):
    # given
    assert "You have no token." in annotator_client.get(URL).content.decode()
    # when
    made = annotator_client.post(URL, {"action": "rotate"}, headers=HX)
    # then
    key = _shown_key(made)
    assert made.status_code == 200 and "<html" not in made.content.decode()
    assert key == Token.objects.get(user=annotator).key
    assert _projects(key) == 200
    later = annotator_client.get(URL).content.decode()
    assert key not in later and f"…{key[-4:]}" in later
    assert "no-store" in annotator_client.get(URL)["Cache-Control"]


def test_rotating_and_revoking_end_the_old_key_and_leave_others_alone(
    researcher_client, researcher, annotator
):
    other = Token.objects.create(user=annotator)
    first = _shown_key(researcher_client.post(URL, {"action": "rotate"}))
    second = _shown_key(researcher_client.post(URL, {"action": "rotate"}))
    assert first and second and first != second
    assert _projects(first) == 401 and _projects(second) == 200
    revoked = researcher_client.post(URL, {"action": "revoke"}, headers=HX)
    assert "Your token is revoked." in revoked.content.decode()
    assert _projects(second) == 401
    assert not Token.objects.filter(user=researcher).exists()
    assert Token.objects.get(user=annotator) == other and _projects(other.key) == 200


def test_an_unknown_action_is_a_400_that_changes_nothing(annotator_client, annotator):
    token = Token.objects.create(user=annotator)
    response = annotator_client.post(URL, {"action": "steal"})
    assert response.status_code == 400
    assert "Unknown action" in response.content.decode()
    assert Token.objects.get(user=annotator).key == token.key


def test_the_page_needs_a_sign_in(client):
    response = client.get(URL)
    assert response.status_code == 302 and "/login/" in response["Location"]
