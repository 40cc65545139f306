"""The framework floor of `bench/annotate_load.py --floor` (bench/floor_urls.py): the
annotator API's next and submit URLs answered by views that do no work, but behind
everything a real request passes through. If the floor skipped the token's check or the
body's reading, the benchmark would understate what the framework costs."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from django.test import override_settings
from django.urls import clear_url_caches
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.conftest import REPO

pytestmark = pytest.mark.django_db
API = "/api/v1/annotation"


@pytest.fixture
def floor() -> Iterator[None]:
    sys.path.insert(0, str(REPO / "bench"))
    clear_url_caches()
    try:
        with override_settings(ROOT_URLCONF="floor_urls"):
            yield
    finally:
        clear_url_caches()
        sys.path.remove(str(REPO / "bench"))
        sys.modules.pop("floor_urls", None)


@pytest.fixture
def client(django_user_model) -> APIClient:
    user = django_user_model.objects.create_user("floor-annotator")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_the_floor_answers_next_and_submit_without_doing_the_work(floor, client):
    # when an annotator asks for a task in a campaign that does not exist
    card = client.post(f"{API}/campaigns/999999/next/")
    # then the floor answers a card of the real one's shape all the same (no claim ran)
    assert card.status_code == 200
    task = card.json()
    assert {"assignment_id", "expires_at", "instruction", "response", "skills"} <= set(task)
    assert [len(skill["anchors"]) for skill in task["skills"]] == [5, 5, 5]
    # and a submission of its skills is answered as recorded (nothing is)
    scores = [{"skill_id": s["skill_id"], "score": 4} for s in task["skills"]]
    body = {"scores": scores, "active_ms": 5000}
    done = client.post(f"{API}/assignments/{task['assignment_id']}/submit/", body, format="json")
    assert done.status_code == 201
    assert done.json() == {
        "assignment_id": task["assignment_id"],
        "status": "submitted",
        "late": False,
    }
    # the rest of the project's URLs are still there
    assert client.get(f"{API}/campaigns/").status_code == 200


def test_the_floor_still_checks_the_token_and_reads_the_body(floor, client):
    # a request without a token, or with one that is unknown, is refused as by the real API
    assert APIClient().post(f"{API}/campaigns/1/next/").status_code == 401
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert stranger.post(f"{API}/campaigns/1/next/").status_code == 401
    # and the submission's body is read as the real submit reads it
    odd = {"scores": [{"skill_id": 1, "score": "4"}], "active_ms": 5000}
    assert client.post(f"{API}/assignments/7/submit/", odd, format="json").status_code == 400
