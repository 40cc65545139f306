"""A pairwise campaign's page speaks of pairs, judgments and choices, a pointwise one of
responses and scores: the progress line, the per-skill table, quality control, the review
section and the cost estimate it loads."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import CampaignMode
from tests.annotation.test_annotate_api import make_dataset

pytestmark = pytest.mark.django_db

MODELS = ("m-a", "m-b", "m-c")
POINTWISE_WORDS = ("responses complete", "or more apart", "one response scored on all")


@pytest.fixture
def campaigns(project, tmp_path, annotator):
    dataset = make_dataset(project, tmp_path, items=4, models=MODELS)
    found = {}
    for mode in (CampaignMode.POINTWISE, CampaignMode.PAIRWISE):
        campaign = campaign_create(
            project=project,
            dataset=dataset,
            name=f"C {mode}",
            overlap=2,
            annotators=[annotator],
            mode=mode,
        )
        campaign_activate(campaign=campaign)
        found[mode] = campaign
    return found


def campaign_pages(client, campaign) -> str:
    """The campaign page with the sections it loads (review, cost estimate)."""
    pk = campaign.pk
    pages = [
        client.get(reverse("annotation:campaign-detail", args=[pk])),
        client.get(reverse("annotation:review-summary", args=[pk]), HTTP_HX_REQUEST="true"),
        client.get(reverse("annotation:campaign-pace", args=[pk]), HTTP_HX_REQUEST="true"),
    ]
    assert [page.status_code for page in pages] == [200, 200, 200]
    return " ".join(" ".join(page.content.decode().split()) for page in pages)


def test_a_pairwise_campaign_page_speaks_of_pairs_and_choices(campaigns, researcher_client):
    text = campaign_pages(researcher_client, campaigns[CampaignMode.PAIRWISE])
    for words in POINTWISE_WORDS:
        assert words not in text
    assert "of 24 judgments" in text  # 12 pairs (3 per item), K = 2
    assert "0 of 12 pairs judged by 2 annotators" in text
    assert '<th>Skill</th><th class="num">Choices</th>' in text
    assert "No gold, attention or repeat pair has been judged yet." in text
    assert "Choices that disagree are not queued for review" in text
    assert "A <b>judgment</b> is one pair judged on every question its task asks" in text


def test_a_pointwise_campaign_page_keeps_its_words(campaigns, researcher_client):
    text = campaign_pages(researcher_client, campaigns[CampaignMode.POINTWISE])
    assert "0 of 12 responses complete" in text and "of 24 annotations" in text
    assert "scores 2 or more apart, or a gold miss" in text
    assert "one response scored on all the skills its task asks" in text
    assert "pairs judged" not in text and "Choices that disagree" not in text
