"""Shared fixtures: personas with logged-in clients, projects, and the real-data path."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from annotation.models import ProjectRole
from annotation.services.projects import membership_set, project_create

REPO = Path(__file__).resolve().parent.parent
SHARED_FLASK = REPO.parent / "shared" / "data" / "flask"


@pytest.fixture
def flask_data() -> Path:
    """The real FLASK release next to the repository; tests using it skip without it."""
    if not (SHARED_FLASK / "flask_evaluation.jsonl").is_file():
        pytest.skip("../shared/data/flask is not present")
    return SHARED_FLASK


@pytest.fixture(autouse=True)
def _media_tmp(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def project(db):
    return project_create(slug="demo-project", name="Demo project")


def _user(django_user_model, username, **extra):
    return django_user_model.objects.create_user(
        username=username, password="pw-" + username, email=f"{username}@example.org", **extra
    )


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin_user(db, django_user_model):
    return _user(django_user_model, "admin", is_staff=True, is_superuser=True)


@pytest.fixture
def admin_client(admin_user):
    return _client(admin_user)


@pytest.fixture
def researcher(db, django_user_model, project):
    user = _user(django_user_model, "rita")
    membership_set(project=project, user=user, role=ProjectRole.RESEARCHER)
    return user


@pytest.fixture
def researcher_client(researcher):
    return _client(researcher)


@pytest.fixture
def annotator(db, django_user_model, project):
    user = _user(django_user_model, "alice")
    membership_set(project=project, user=user, role=ProjectRole.ANNOTATOR)
    return user


@pytest.fixture
def annotator_client(annotator):
    return _client(annotator)


@pytest.fixture
def outsider(db, django_user_model):
    return _user(django_user_model, "charlie")


@pytest.fixture
def outsider_client(outsider):
    return _client(outsider)
