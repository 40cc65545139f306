"""Why there is no task: one rule (annotation.annotate.selectors.no_task_reason) behind the
API's No-Task-Reason header, a chained submit's next_reason and the annotate page's words."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.annotate.selectors import NO_TASK_MESSAGES, no_task_reason
from annotation.campaigns.services import campaign_set_status
from annotation.models import Campaign, CampaignStatus
from tests.annotation.test_annotate_views import build_campaign, build_dataset
from tests.clients import token_client

pytestmark = pytest.mark.django_db

BASE = "/api/v1/annotation"


def _claim_and_submit(client, campaign) -> dict:
    """Claim a task through the API and submit it with next=true; the submit's body."""
    task = client.post(f"{BASE}/campaigns/{campaign.pk}/next/").json()
    scores = [{"skill_id": s["skill_id"], "score": 4} for s in task["skills"]]
    response = client.post(
        f"{BASE}/assignments/{task['assignment_id']}/submit/",
        {"scores": scores, "next": True},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()


@pytest.fixture
def api(annotator):
    return token_client(annotator)


@pytest.fixture
def two_items(project, tmp_path):
    return build_dataset(project, tmp_path, texts=["first", "second"], name="Two")


def _draft(project, dataset, annotator, api):
    return build_campaign(project, dataset, annotators=[annotator], activate=False), None


def _paused(project, dataset, annotator, api):
    campaign = build_campaign(project, dataset, annotators=[annotator])
    return campaign_set_status(campaign=campaign, status=CampaignStatus.PAUSED), None


def _finished(project, dataset, annotator, api):
    campaign = build_campaign(project, dataset, annotators=[annotator])
    return campaign_set_status(campaign=campaign, status=CampaignStatus.FINISHED), None


def _quota_met(project, dataset, annotator, api):
    campaign = build_campaign(project, dataset, annotators=[annotator], quota_per_annotator=1)
    return campaign, _claim_and_submit(api, campaign)


def _nothing_left(project, dataset, annotator, api):
    campaign = build_campaign(project, dataset, annotators=[annotator], overlap=1)
    _claim_and_submit(api, campaign)
    return campaign, _claim_and_submit(api, campaign)


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (_draft, "campaign_draft"),
        (_paused, "campaign_paused"),
        (_finished, "campaign_finished"),
        (_quota_met, "quota_reached"),
        (_nothing_left, "no_task_available"),
    ],
)
def test_the_api_and_the_page_give_the_same_reason(
    make, code, project, two_items, annotator, annotator_client, api
):
    # given a campaign in which the annotator can get no task, for the reason `code`
    campaign, chained = make(project, two_items, annotator, api)
    # when the API, the page and the rule itself are asked
    header = api.post(f"{BASE}/campaigns/{campaign.pk}/next/")
    page = annotator_client.get(reverse("annotation:annotate", args=[campaign.pk]))
    reason = no_task_reason(campaign=Campaign.objects.get(pk=campaign.pk), user=annotator)
    # then they agree
    assert reason == code
    assert header.status_code == 204 and header["No-Task-Reason"] == code
    assert page.status_code == 200 and NO_TASK_MESSAGES[code] in page.content.decode()
    if chained is not None:  # the submit that left nothing asked the same rule
        assert chained["next"] is None and chained["next_reason"] == code


def test_the_reason_reads_the_campaign_as_it_is_now(project, two_items, annotator):
    # given an instance read while the campaign was active
    campaign = build_campaign(project, two_items, annotators=[annotator])
    stale = Campaign.objects.get(pk=campaign.pk)
    # when the campaign is paused meanwhile
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.PAUSED)
    # then the reason is the pause, not "nothing left"
    assert no_task_reason(campaign=stale, user=annotator) == "campaign_paused"


def test_every_reason_has_words_for_the_page():
    statuses = {f"campaign_{s}" for s in CampaignStatus.values if s != CampaignStatus.ACTIVE}
    others = {"quota_reached", "no_task_available", "screened_out"}
    assert set(NO_TASK_MESSAGES) == statuses | others
