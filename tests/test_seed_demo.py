"""The demo's seed: idempotent, and its crowd study works from the printed link alone."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from annotation.models import (
    Campaign,
    ParticipantState,
    ProjectMembership,
    ProjectRole,
    Task,
    TaskKind,
)

pytestmark = pytest.mark.django_db


def _seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", base_url="http://testserver", stdout=out)
    return out.getvalue()


def test_seed_demo_makes_a_crowd_study_a_worker_can_enter(client):
    printed = _seed()
    assert ProjectMembership.objects.get(user__username="reviewer").role == ProjectRole.REVIEWER
    study = Campaign.objects.get(name="Demo crowd study")
    assert study.screening and study.consent_text and study.completion_code
    kinds = Task.objects.filter(campaign=study).values_list("kind", flat=True)
    assert list(kinds).count(TaskKind.TRAINING) == 2
    assert list(kinds).count(TaskKind.QUALIFICATION) == 2

    url = re.search(r"http://testserver(/study/\S+)", printed).group(1)
    answer = client.get(url)
    assert answer.status_code == 302
    participant = study.participants.get()
    assert participant.worker_id == "demo-worker-1"
    assert participant.state == ParticipantState.CONSENT

    again = _seed()  # idempotent: nothing new, the same link printed
    assert Campaign.objects.filter(name="Demo crowd study").count() == 1
    assert Task.objects.filter(campaign=study).count() == len(kinds)
    assert url in again


def test_the_demo_has_a_small_pairwise_campaign():
    call_command("seed_demo", stdout=io.StringIO())
    campaign = Campaign.objects.get(name="Demo pairwise comparison")
    assert (campaign.mode, campaign.status, campaign.overlap) == ("pairwise", "active", 2)
    tasks = Task.objects.filter(campaign=campaign)
    assert tasks.count() == 12 and not tasks.filter(response_b__isnull=True).exists()
    call_command("seed_demo", stdout=io.StringIO())  # again: nothing new
    assert Task.objects.filter(campaign=campaign).count() == 12
