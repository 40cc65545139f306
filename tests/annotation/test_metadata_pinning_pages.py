"""The pages of pinned metadata: the verification page says what a verdict will and will not
change (running campaigns keep what they pinned), its editor round-trips several domains and
labels the difficulty levels, and the apply page lists what applying verified metadata to a
running campaign changes, then applies it all at once or, when the list changed, nothing."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from annotation.metadata.selectors import item_metadata
from annotation.models import CampaignItemPin, MetadataProposal
from annotation.services.metadata import ProposalSpec, metadata_proposals_record
from tests.annotation.test_metadata_pinning import (
    NEW,
    NEW_KEYS,
    OLD,
    asked,
    item,
    make_campaign,
    make_dataset,
    task_on,
    verify,
)

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}


@pytest.fixture
def dataset(project, tmp_path):
    dataset = make_dataset(project, tmp_path)
    metadata_proposals_record(
        run_id=5,
        label="Meta",
        proposals=[
            ProposalSpec(item_id=pk, status="ok", domains=["math"], skills=NEW_KEYS, difficulty=3)
            for pk in dataset.items.order_by("pk").values_list("pk", flat=True)
        ],
    )
    return dataset


def proposal(dataset, external_id="i0") -> MetadataProposal:
    return MetadataProposal.objects.get(item=item(dataset, external_id), origin="run:5")


def page(client, dataset, external_id="i0", **headers):
    url = reverse("annotation:metadata-verify-page", args=[dataset.pk])
    return client.get(f"{url}?origin=run:5&item={item(dataset, external_id).pk}", headers=headers)


def text(response) -> str:
    """The page's words, tags dropped and white space collapsed."""
    words = " ".join(re.sub(r"<[^>]+>", " ", response.content.decode()).split())
    return re.sub(r" ([.,:])", r"\1", words)


def test_the_page_says_running_campaigns_keep_what_they_pinned(researcher_client, project, dataset):
    running = make_campaign(project, dataset, name="Demo campaign")
    make_campaign(project, dataset, name="Next round", activate=False)
    shown = text(page(researcher_client, dataset))
    assert (
        "Campaigns already running keep the skills they pinned: 1 running campaign uses this "
        "item." in shown
    )
    assert "Demo campaign (active) asks Factuality, Comprehension, Readability" in shown
    assert "drafts when they are activated (1 draft of this dataset: Next round)" in shown
    apply_url = reverse("annotation:metadata-apply-page", args=[running.pk])
    assert (
        f'href="{apply_url}?item={item(dataset).pk}"'
        in page(researcher_client, dataset).content.decode()
    )


def test_accepting_by_htmx_says_which_running_campaigns_kept_their_skills(
    researcher_client, project, dataset
):
    running = make_campaign(project, dataset, name="Demo campaign")
    response = researcher_client.post(
        reverse("annotation:metadata-verify", args=[proposal(dataset).pk]),
        {"verdict": "accepted"},
        headers=HX,
    )
    notice = text(response).split("Item i0: accepted.", 1)[1].strip()
    assert notice.startswith(
        "1 running campaign keeps the skills it pinned for item i0: apply the verified "
        "metadata to Demo campaign."
    )
    assert item_metadata(item=item(dataset))["skills"] == NEW_KEYS
    assert asked(running, task_on(running)) == OLD


def test_a_page_with_no_running_campaign_says_nothing_running_changes(researcher_client, dataset):
    assert "No running campaign uses this item: nothing running changes." in text(
        page(researcher_client, dataset)
    )


def test_the_editor_offers_domains_as_checkboxes_and_labels_each_difficulty_level(
    researcher_client, dataset
):
    body = page(researcher_client, dataset).content.decode()
    editor = body.split("data-edit", 1)[1].split('<div class="submit-bar">', 1)[0]
    assert "data-edit-heading" in editor and 'tabindex="-1"' in editor
    assert len(re.findall(r'<input type="checkbox" name="domains"', editor)) == 10
    assert re.search(r'<input type="checkbox" name="domains" value="math" checked', editor)
    assert "<legend>Difficulty" in editor
    levels = re.findall(
        r'<input type="radio" name="difficulty" value="(\d)" aria-label="([^"]+)"', editor
    )
    assert levels[0] == ("1", "1 — simple lifestyle knowledge")
    assert [v for v, _ in levels] == ["1", "2", "3", "4", "5"]
    assert '<select name="domain"' not in editor


def test_an_edit_round_trips_several_domains(researcher_client, dataset):
    response = researcher_client.post(
        reverse("annotation:metadata-verify", args=[proposal(dataset).pk]),
        {
            "verdict": "edited",
            "domains": ["math", "coding"],
            "skill_1": "factuality",
            "skill_2": "readability",
            "skill_3": "conciseness",
            "difficulty": "4",
        },
    )
    assert response.status_code == 302
    assert item_metadata(item=item(dataset)) == {
        "domains": ["coding", "math"],
        "skills": ["factuality", "readability", "conciseness"],
        "difficulty": 4,
    }
    # and the item's page, opened again, has both ticked
    body = page(researcher_client, dataset).content.decode()
    current = body.split("data-current-domains>", 1)[1].split("</dd>", 1)[0]
    assert current == "Coding, Math"


# --- the apply page -----------------------------------------------------------------------------


def apply_page(client, campaign, query=""):
    return client.get(reverse("annotation:metadata-apply-page", args=[campaign.pk]) + query)


def test_the_apply_page_lists_then_applies_the_verified_metadata(
    researcher_client, project, dataset, researcher
):
    campaign = make_campaign(project, dataset, name="Demo campaign")
    verify(dataset, researcher)
    listed = apply_page(researcher_client, campaign)
    shown = text(listed)
    assert "1 item can be applied" in shown
    row = listed.content.decode().split(f'data-item="{item(dataset).pk}"', 1)[1].split("</tr>")[0]
    assert ", ".join(OLD) in row and ", ".join(NEW) in row
    plan = re.search(r'name="plan" value="([0-9a-f]+)"', listed.content.decode()).group(1)
    done = researcher_client.post(
        reverse("annotation:metadata-apply", args=[campaign.pk]), {"plan": plan}, follow=True
    )
    assert "Applied the verified metadata of 1 item to Demo campaign" in text(done)
    assert "there is nothing to apply" in text(done)
    assert asked(campaign, task_on(campaign)) == NEW


def test_an_apply_whose_list_changed_applies_nothing_and_shows_it_again(
    researcher_client, project, dataset, researcher
):
    campaign = make_campaign(project, dataset)
    verify(dataset, researcher)
    listed = apply_page(researcher_client, campaign, f"?item={item(dataset).pk}")
    plan = re.search(r'name="plan" value="([0-9a-f]+)"', listed.content.decode()).group(1)
    assert f'name="items" value="{item(dataset).pk}"' in listed.content.decode()
    verify(dataset, researcher, skills=["factuality", "conciseness", "readability"], run_id=6)
    again = researcher_client.post(
        reverse("annotation:metadata-apply", args=[campaign.pk]),
        {"plan": plan, "items": [item(dataset).pk]},
        headers=HX,
    )
    assert again.status_code == 200 and "<html" not in again.content.decode()
    assert "changed since it was listed; nothing was applied" in text(again)
    assert "Factuality, Conciseness, Readability" in text(again)
    assert CampaignItemPin.objects.get(campaign=campaign, item=item(dataset)).verification is None


def test_the_apply_page_of_a_draft_has_nothing_to_apply(researcher_client, project, dataset):
    draft = make_campaign(project, dataset, activate=False)
    shown = text(apply_page(researcher_client, draft))
    assert "reads the items' own (verified) metadata when it is activated" in shown
    assert 'name="plan"' not in apply_page(researcher_client, draft).content.decode()


def test_annotators_cannot_see_or_apply(annotator_client, project, dataset):
    campaign = make_campaign(project, dataset)
    assert apply_page(annotator_client, campaign).status_code == 403
    posted = annotator_client.post(
        reverse("annotation:metadata-apply", args=[campaign.pk]), {"plan": "x"}
    )
    assert posted.status_code == 403


def test_a_refused_edit_is_shown_again_as_entered(researcher_client, dataset):
    response = researcher_client.post(
        reverse("annotation:metadata-verify", args=[proposal(dataset).pk]),
        {
            "verdict": "edited",
            "domains": ["math", "coding"],
            "skill_1": "factuality",
            "skill_2": "factuality",
            "skill_3": "conciseness",
            "difficulty": "5",
        },
    )
    body = response.content.decode()
    assert "choose three different skills" in body
    ticked = re.findall(r'name="domains" value="(\w+)" checked', body)
    assert sorted(ticked) == ["coding", "math"]
    assert re.search(r'value="5" aria-label="5 — expert level knowledge" checked', body)
    assert "data-edit hidden" not in body  # the editor stays open
