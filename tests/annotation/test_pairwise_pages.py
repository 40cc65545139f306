"""The pair card (the scoring page of a pairwise campaign) and the annotators' API for pair
tasks: both responses in the stored shown order, blind, answers by side turned into the
pair's A/B terms."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import Assignment, Campaign, CampaignMode, HumanPreference, Task
from tests.annotation.test_annotate_api import BASE, MODELS, api, make_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(project, tmp_path, annotator) -> Campaign:
    dataset = make_dataset(project, tmp_path, items=4, models=MODELS)
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="Pairs",
        overlap=1,
        annotators=[annotator],
        mode=CampaignMode.PAIRWISE,
        pair_choices=["a", "b", "tie", "both_bad"],
        pair_strength=True,
        pair_rationale=True,
    )
    campaign_activate(campaign=campaign)
    return campaign


def held(annotator) -> Assignment:
    return Assignment.objects.select_related("task__response", "task__response_b").get(
        annotator=annotator, status="active"
    )


def test_the_pair_card_shows_both_responses_in_the_stored_order_and_no_model_name(
    annotator_client, annotator, campaign
):
    # make one task show B on the left and one A, so both orders are checked
    page = annotator_client.get(reverse("annotation:annotate", args=[campaign.pk]))
    body = page.content.decode()
    assert page.status_code == 200
    lease = held(annotator)
    task = lease.task
    left, right = (
        (task.response_b, task.response) if task.b_left else (task.response, task.response_b)
    )
    assert body.index(left.text) < body.index(right.text)
    assert "Response A" in body and "Response B" in body
    for name in MODELS:
        assert name not in body
    assert "data-pair-form" in body and "annotate_pair.js" in body
    assert 'value="both_bad"' in body and "Factuality" in body and "Overall" in body
    assert body.count('name="pref-') == 4 * 4  # three skills and overall, four choices each
    assert 'name="strength-overall"' in body and 'name="rationale-overall"' in body


@pytest.mark.parametrize("b_left", [False, True])
def test_a_side_chosen_on_the_page_is_stored_as_the_pairs_a_or_b(
    annotator_client, annotator, campaign, b_left
):
    Task.objects.filter(campaign=campaign).update(b_left=b_left)
    annotator_client.get(reverse("annotation:annotate", args=[campaign.pk]))
    lease = held(annotator)
    skills = list(lease.task.response.item.item_skills.values_list("skill_id", flat=True))
    data = {f"pref-{sid}": "tie" for sid in skills}
    data |= {"pref-overall": "left", "strength-overall": "2", "rationale-overall": "clearer"}
    data |= {"active_ms": "5300", "time-overall": "1200"}
    response = annotator_client.post(
        reverse("annotation:annotate-submit", args=[lease.pk]), data, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200 and "Saved." in response.content.decode()
    overall = HumanPreference.objects.get(assignment=lease, skill=None)
    assert overall.choice == ("b" if b_left else "a")  # the left one was preferred
    assert (overall.strength, overall.rationale, overall.time_ms) == (2, "clearer", 1200)
    assert HumanPreference.objects.filter(assignment=lease, choice="tie").count() == 3
    assert Assignment.objects.get(pk=lease.pk).active_ms == 5300


def test_an_incomplete_pair_card_is_redrawn_with_the_answers_kept(
    annotator_client, annotator, campaign
):
    annotator_client.get(reverse("annotation:annotate", args=[campaign.pk]))
    lease = held(annotator)
    response = annotator_client.post(
        reverse("annotation:annotate-submit", args=[lease.pk]),
        {"pref-overall": "right", "rationale-overall": "<b>bold</b>"},
        headers={"HX-Request": "true"},
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "Please choose for: Factuality, Comprehension, Readability" in body
    assert 'name="pref-overall" value="right" checked' in body
    assert "&lt;b&gt;bold&lt;/b&gt;" in body and "<b>bold</b>" not in body
    assert not HumanPreference.objects.exists()


def test_the_api_gives_a_pair_by_side_and_takes_preferences_by_side(annotator, campaign):
    client = api(annotator)
    card = client.post(f"{BASE}/campaigns/{campaign.pk}/next/").json()
    assert card["response"] == "" and set(card["pair"]) == {
        "left",
        "right",
        "questions",
        "choices",
        "strength",
        "rationale",
    }
    task = Task.objects.select_related("response", "response_b").get(
        assignments__pk=card["assignment_id"]
    )
    shown_left = task.response_b if task.b_left else task.response
    assert card["pair"]["left"] == shown_left.text
    assert card["pair"]["choices"] == ["left", "right", "tie", "both_bad"]
    assert [q["name"] for q in card["pair"]["questions"]] == [
        "Factuality",
        "Comprehension",
        "Readability",
        "Overall",
    ]
    answers = [
        {"skill_id": q["skill_id"], "choice": "right", "strength": 1}
        for q in card["pair"]["questions"]
    ]
    done = client.post(
        f"{BASE}/assignments/{card['assignment_id']}/submit/",
        {"preferences": answers, "next": True},
        format="json",
    )
    assert done.status_code == 201 and done.json()["next"]["pair"]
    stored = set(HumanPreference.objects.values_list("choice", flat=True))
    assert stored == {"a" if task.b_left else "b"}


def test_the_api_refuses_scores_for_a_pair_and_both_kinds_at_once(annotator, campaign):
    client = api(annotator)
    card = client.post(f"{BASE}/campaigns/{campaign.pk}/next/").json()
    url = f"{BASE}/assignments/{card['assignment_id']}/submit/"
    both = client.post(
        url,
        {
            "scores": [{"skill_id": 1, "score": 3}],
            "preferences": [{"skill_id": None, "choice": "tie"}],
        },
        format="json",
    )
    assert both.status_code == 400 and "not both" in both.content.decode()
    scores = client.post(url, {"scores": [{"skill_id": 1, "score": 3}]}, format="json")
    assert scores.status_code == 400 and "submit a preference" in scores.content.decode()
    wrong = client.post(url, {"preferences": [{"skill_id": None, "choice": "a"}]}, format="json")
    assert wrong.status_code == 400
    assert not HumanPreference.objects.exists()
