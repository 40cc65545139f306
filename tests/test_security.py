"""Site-wide protections: security headers and the audit trail of score edits and deletions
(sign-in throttling: tests/test_signin_throttle.py)."""

from __future__ import annotations

import uuid

import pytest

from annotation.audit import actor_set
from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import Campaign, HumanScore, HumanScoreDeletion, HumanScoreRevision
from annotation.services.assignments import human_score_edit
from flaskweb.security import CONTENT_SECURITY_POLICY
from tests.annotation.test_assignments import make_dataset
from tests.annotation.test_reannotation import annotate_all

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counts(settings):
    """Counters of this test only: a key prefix of its own (clearing the cache would wipe
    the Redis database that parallel test processes share)."""
    default = settings.CACHES["default"]
    prefix = f"{default.get('KEY_PREFIX', '')}-{uuid.uuid4().hex[:12]}"
    settings.CACHES = {**settings.CACHES, "default": {**default, "KEY_PREFIX": prefix}}


# --- headers ---------------------------------------------------------------------------------


def test_every_page_carries_the_security_headers(client, researcher_client, project):
    for response in (client.get("/login/"), researcher_client.get(f"/projects/{project.slug}/")):
        assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
        assert "script-src 'self'" in CONTENT_SECURITY_POLICY
        assert "unsafe-eval" not in CONTENT_SECURITY_POLICY
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Cross-Origin-Opener-Policy"] == "same-origin"
        assert "camera=()" in response.headers["Permissions-Policy"]


def test_no_template_has_an_inline_script_or_event_handler():
    # the policy forbids them: one would silently stop working in the browser
    import re
    from pathlib import Path

    offenders = []
    for path in Path("templates").rglob("*.html"):
        text = path.read_text()
        for match in re.finditer(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")", text):
            offenders.append(f"{path}:{text[: match.start()].count(chr(10)) + 1}")
        if re.search(r"\son[a-z]+\s*=", text):
            offenders.append(f"{path}: inline event handler")
    assert offenders == []


# --- audit trail ---------------------------------------------------------------------------


@pytest.fixture
def scored_campaign(project, tmp_path, django_user_model):
    people = [django_user_model.objects.create_user(n, password="x") for n in ("ann", "ben")]
    dataset = make_dataset(project, tmp_path)
    campaign = campaign_create(
        project=project, dataset=dataset, name="Audit", overlap=2, annotators=people
    )
    campaign_activate(campaign=campaign)
    annotate_all(campaign, *people)
    return campaign


def test_an_edit_keeps_who_when_and_before_after(scored_campaign, admin_user):
    row = HumanScore.objects.filter(campaign=scored_campaign).order_by("pk").first()
    old = row.score
    human_score_edit(score_id=row.pk, editor=admin_user, score=1 if old != 1 else 2)
    [revision] = HumanScoreRevision.objects.filter(score=row)
    assert revision.edited_by == admin_user and revision.score_ref == row.pk
    assert revision.before["score"] == old and revision.after["score"] in (1, 2)


def test_deleting_a_campaign_records_every_score_it_takes_with_it(scored_campaign, admin_user):
    # given: an edited score, so there is history to keep
    first = HumanScore.objects.filter(campaign=scored_campaign).order_by("pk").first()
    human_score_edit(score_id=first.pk, editor=admin_user, score=None)
    scores = {
        s.pk: (s.score, s.is_na, s.annotator.username, s.skill.name)
        for s in HumanScore.objects.filter(campaign=scored_campaign).select_related(
            "annotator", "skill"
        )
    }
    assert len(scores) > 10
    # when: the campaign is deleted (the ORM cascade the admin uses), by a known actor
    with actor_set(user=admin_user, context="test: delete campaign"):
        Campaign.objects.filter(pk=scored_campaign.pk).delete()
    # then: every score is gone, and each one is on record as it was
    assert not HumanScore.objects.filter(pk__in=scores).exists()
    records = {d.score_ref: d for d in HumanScoreDeletion.objects.all()}
    assert set(records) == set(scores)
    for pk, (score, is_na, username, skill) in scores.items():
        record = records[pk]
        assert (record.before["score"], record.before["is_na"]) == (score, is_na)
        assert (record.annotator_username, record.skill_name) == (username, skill)
        assert record.deleted_by == admin_user and record.context == "test: delete campaign"
        assert record.campaign_ref == scored_campaign.pk
    # and the edit history survives its score
    [revision] = HumanScoreRevision.objects.filter(score_ref=first.pk)
    assert revision.score is None and revision.after["is_na"] is True


def test_the_admin_cannot_cascade_scores_away(scored_campaign, admin_client):
    before = HumanScore.objects.filter(campaign=scored_campaign).count()
    url = f"/admin/annotation/campaign/{scored_campaign.pk}/delete/"
    page = admin_client.get(url)
    assert "human score" in page.content.decode().lower()  # it says what blocks it
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert HumanScore.objects.filter(campaign=scored_campaign).count() == before
    assert HumanScoreDeletion.objects.count() == 0


def test_a_deletion_during_a_request_names_the_signed_in_user(scored_campaign, admin_user, rf):
    from annotation.audit import AuditActorMiddleware

    row = HumanScore.objects.filter(campaign=scored_campaign).first()
    request = rf.post("/somewhere/delete/")
    request.user = admin_user

    def view(request):
        HumanScore.objects.filter(pk=row.pk).delete()
        return None

    AuditActorMiddleware(view)(request)
    [record] = HumanScoreDeletion.objects.all()
    assert record.score_ref == row.pk and record.deleted_by == admin_user
    assert record.context == "POST /somewhere/delete/"


def test_a_rolled_back_deletion_leaves_no_record(scored_campaign):
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        HumanScore.objects.filter(campaign=scored_campaign).delete()
        raise RuntimeError("changed my mind")
    assert HumanScoreDeletion.objects.count() == 0
    assert HumanScore.objects.filter(campaign=scored_campaign).exists()


def test_an_unknown_api_path_answers_json_in_production(client, settings):
    settings.DEBUG = False
    response = client.get("/api/v1/no-such-endpoint/")
    assert response.status_code == 404
    assert response.json() == {
        "detail": "no API endpoint at /api/v1/no-such-endpoint/",
        "code": "not_found",
    }
    page = client.get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def test_the_favicon_is_served_where_browsers_look(client):
    """Every page (the Django admin and the API docs included) asks for /favicon.ico: it
    is an SVG, cached for a week, and takes GET and HEAD only."""
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert "max-age=604800" in response["Cache-Control"]
    assert response.content.startswith(b"<svg") and b"<script" not in response.content
    assert client.head("/favicon.ico").status_code == 200
    assert client.post("/favicon.ico").status_code == 405
