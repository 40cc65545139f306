"""The demo's seed: idempotent, and its crowd study works from the printed link alone."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse

from analytics.minimums import too_few
from analytics.report.snapshots import (
    report_snapshot_compute,
    snapshot_params,
    snapshot_part,
    snapshot_request,
)
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    HumanPreference,
    ParticipantState,
    ProjectMembership,
    ProjectRole,
    Task,
    TaskKind,
)

pytestmark = pytest.mark.django_db
User = get_user_model()


def _seed() -> str:
    out = io.StringIO()
    call_command("seed_demo", base_url="http://testserver", stdout=out)
    return out.getvalue()


def test_seed_demo_makes_a_crowd_study_a_worker_can_enter(client):
    printed = _seed()
    assert ProjectMembership.objects.get(user__username="reviewer").role == ProjectRole.REVIEWER
    study = Campaign.objects.get(name="Demo crowd study")
    assert study.screening and study.consent_text and study.completion_code
    # offered in Spanish and Arabic too, with their own consent, instructions and message
    translated = study.translations.values_list("language", "consent_text", "completion_message")
    assert {language for language, consent, message in translated if consent and message} == {
        "es",
        "ar",
    }
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
    assert tasks.count() == 32 and not tasks.filter(response_b__isnull=True).exists()
    call_command("seed_demo", stdout=io.StringIO())  # again: nothing new
    assert Task.objects.filter(campaign=campaign).count() == 32


def test_the_demos_preference_page_has_figures_from_the_start(client):
    """The demo annotators' own choices on the pairwise campaign, submitted through the
    pair card's services: enough for the preference figures (above analytics/minimums.py),
    from three annotators, with ties; a second seed writes nothing; pairs are left to try."""
    _seed()
    campaign = Campaign.objects.get(name="Demo pairwise comparison")
    labels = HumanPreference.objects.filter(campaign=campaign)
    overall = labels.filter(skill__isnull=True)
    assert overall.count() >= 20
    assert set(overall.values_list("annotator__username", flat=True)) == {
        "annotator1",
        "annotator2",
        "annotator3",
    }
    assert overall.filter(choice="tie").exists() and labels.filter(choice="a").exists()
    assert labels.filter(choice="b").exists()
    # written as the pair card writes them: submitted assignments, two per judged pair
    submitted = Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.SUBMITTED)
    assert submitted.count() == overall.count()
    judged = Task.objects.filter(campaign=campaign, submitted__gte=2)
    assert judged.count() == overall.count() // 2
    assert Task.objects.filter(campaign=campaign, submitted=0).exists()  # left to try

    before = (labels.count(), submitted.count())
    _seed()  # idempotent
    assert (labels.count(), submitted.count()) == before

    # the report of the demo (as its worker computes it) has Overall figures to show, all
    # above their minimums: strengths, agreement and their bootstrap intervals over items
    snapshot, _ = snapshot_request(project=campaign.project, params=snapshot_params())
    done = report_snapshot_compute(snapshot_id=snapshot.pk)
    figures = snapshot_part(done, "preferences")["skills"]["Overall"]
    assert too_few("bradley_terry", figures["labels"]) == ""
    assert too_few("agreement", figures["agreement"]["units_pairable"]) == ""
    assert too_few("interval", figures["items"]) == ""
    assert figures["raters"] == 3 and 0 < figures["choices"]["tie"] < figures["labels"] / 2
    strengths = figures["bradley_terry"]["strengths"]
    assert set(strengths) == {"aurora-7b", "basalt-13b", "cobalt-70b", "delta-chat"}
    assert all(s["low"] is not None for s in strengths.values())
    # and the page shows them, none of them "too few"
    client.force_login(User.objects.get(username="researcher"))
    page = client.get(reverse("analytics:preferences", args=["demo"]))
    body = page.content.decode()
    assert page.status_code == 200 and "cobalt-70b" in body
    assert 'class="pref-too-few"' not in body and "pref-bt-too-few" not in body
