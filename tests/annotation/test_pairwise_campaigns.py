"""Pairwise campaigns: creation checks, the pair tasks activation creates, gold pairs, and
the plain preference rows analytics reads (annotation.selectors.human_preference_rows)."""

from __future__ import annotations

from collections import Counter

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from annotation.campaigns.services import (
    campaign_activate,
    campaign_create,
    campaign_update,
    gold_pair_set,
    gold_task_set,
)
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    GoldPreference,
    HumanPreference,
    Response,
    Task,
    TaskKind,
)
from annotation.selectors import human_preference_rows
from tests.annotation.test_annotate_api import make_dataset
from tests.annotation.test_campaign_views import create_data, url
from tests.clients import token_client

pytestmark = pytest.mark.django_db

FOUR = ("m-delta", "m-alpha", "m-charlie", "m-bravo")


def pairwise(project, dataset, **options) -> Campaign:
    options.setdefault("name", "Pairs")
    return campaign_create(project=project, dataset=dataset, mode=CampaignMode.PAIRWISE, **options)


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path, items=6, models=FOUR)


def pair_models(campaign) -> list[tuple[int, str, str]]:
    return sorted(
        Task.objects.filter(campaign=campaign).values_list(
            "response__item_id", "response__model_name", "response_b__model_name"
        )
    )


def test_all_pairs_campaign_gets_one_task_per_item_and_model_pair(project, dataset):
    campaign = pairwise(project, dataset, overlap=2)
    assert campaign_activate(campaign=campaign) == 6 * 6
    tasks = pair_models(campaign)
    assert len(set(tasks)) == 36
    assert all(a < b for _, a, b in tasks)  # A is the model whose name sorts first
    assert set(Task.objects.filter(campaign=campaign).values_list("overlap", flat=True)) == {2}
    shown = Counter(Task.objects.filter(campaign=campaign).values_list("b_left", flat=True))
    assert shown[True] > 0 and shown[False] > 0
    # a second activation plans the same pairs and creates none
    assert campaign_activate(campaign=campaign) == 0


def test_chosen_models_limit_the_pairs(project, dataset):
    campaign = pairwise(project, dataset, model_names=["m-alpha", "m-bravo", "m-charlie"])
    assert campaign_activate(campaign=campaign) == 6 * 3
    assert {m for _, a, b in pair_models(campaign) for m in (a, b)} == {
        "m-alpha",
        "m-bravo",
        "m-charlie",
    }


def test_anchor_campaign_pairs_each_model_with_the_anchor(project, dataset):
    campaign = pairwise(project, dataset, pair_design="anchor", pair_anchor="m-charlie")
    assert campaign_activate(campaign=campaign) == 6 * 3
    assert all("m-charlie" in (a, b) for _, a, b in pair_models(campaign))


def test_sampled_campaign_meets_its_budget_with_balanced_models(project, dataset):
    campaign = pairwise(project, dataset, pair_design="sampled", pair_budget=14)
    assert campaign_activate(campaign=campaign) == 14
    seen = Counter(m for _, a, b in pair_models(campaign) for m in (a, b))
    assert max(seen.values()) - min(seen.values()) <= 1
    assert sum(seen.values()) == 28


@pytest.mark.parametrize(
    ("options", "field", "message"),
    [
        ({"model_names": ["m-alpha"]}, "model_names", "at least two"),
        ({"pair_design": "anchor"}, "pair_anchor", "needs an anchor"),
        (
            {"pair_design": "anchor", "pair_anchor": "m-zulu"},
            "pair_anchor",
            "not one of the compared models",
        ),
        (
            {
                "pair_design": "anchor",
                "pair_anchor": "m-delta",
                "model_names": ["m-alpha", "m-bravo"],
            },
            "pair_anchor",
            "not one of the compared models",
        ),
        ({"pair_design": "sampled"}, "pair_budget", "needs a budget"),
        ({"pair_design": "sampled", "pair_budget": 37}, "pair_budget", "more than the 36 pairs"),
        ({"pair_budget": 5}, "pair_budget", "only the sampled design"),
        ({"pair_anchor": "m-alpha"}, "pair_anchor", "only the anchor design"),
        ({"pair_choices": ["a", "b", "maybe"]}, "pair_choices", "choices are among"),
        ({"pair_choices": ["a", "a", "b"]}, "pair_choices", "listed twice"),
        ({"pair_choices": ["a"]}, "pair_choices", "at least two"),
        ({"pair_choices": ["a", "tie"]}, "pair_choices", "offer both A and B"),
    ],
)
def test_bad_pairwise_settings_are_refused_with_the_field_and_nothing_is_created(
    project, dataset, options, field, message
):
    with pytest.raises(ValidationError) as caught:
        pairwise(project, dataset, **options)
    assert field in caught.value.message_dict
    assert message in " ".join(caught.value.message_dict[field])
    assert not Campaign.objects.exists()


def test_a_running_pairwise_campaign_keeps_its_design(project, dataset):
    campaign = pairwise(project, dataset)
    campaign_activate(campaign=campaign)
    with pytest.raises(ValidationError, match="pair_design"):
        campaign_update(campaign=campaign, pair_design="sampled", pair_budget=3)
    campaign = campaign_update(campaign=campaign, pair_rationale=True, pair_strength=True)
    assert campaign.pair_rationale and campaign.pair_strength


def test_gold_pair_replaces_the_normal_task_of_that_pair(project, dataset):
    campaign = pairwise(project, dataset)
    campaign_activate(campaign=campaign)
    task = Task.objects.filter(campaign=campaign).order_by("pk").first()
    a, b = task.response, task.response_b
    gold = gold_pair_set(campaign=campaign, response_a=a, response_b=b, choices={None: "a"})
    assert gold.kind == TaskKind.GOLD and gold.overlap == 0
    assert not Task.objects.filter(pk=task.pk).exists()
    assert list(GoldPreference.objects.filter(task=gold).values_list("skill", "choice")) == [
        (None, "a")
    ]
    other = Response.objects.exclude(item_id=a.item_id).first()
    with pytest.raises(ValidationError, match="same item"):
        gold_pair_set(campaign=campaign, response_a=a, response_b=other, choices={None: "a"})
    with pytest.raises(ValidationError, match="known choices"):
        gold_pair_set(campaign=campaign, response_a=a, response_b=b, choices={None: "maybe"})
    with pytest.raises(ValidationError, match="gold_pair_set"):
        gold_task_set(campaign=campaign, response=a, scores={})


def _preference(task, annotator, *, skill=None, choice="a", status=AssignmentStatus.SUBMITTED):
    assignment = Assignment.objects.create(
        task=task,
        campaign=task.campaign,
        annotator=annotator,
        status=status,
        expires_at=timezone.now(),
        submitted_at=timezone.now(),
    )
    return HumanPreference.objects.create(
        assignment=assignment,
        campaign=task.campaign,
        response_a=task.response,
        response_b=task.response_b,
        annotator=annotator,
        skill=skill,
        choice=choice,
        strength=2,
        rationale="clearer",
        time_ms=1200,
    )


def test_preference_rows_are_plain_accepted_rows_of_the_project(
    project, dataset, django_user_model
):
    campaign = pairwise(project, dataset)
    campaign_activate(campaign=campaign)
    other = pairwise(project, dataset, name="Other")
    campaign_activate(campaign=other)
    ann = django_user_model.objects.create_user("ann", password="x")
    bob = django_user_model.objects.create_user("bob", password="x")
    task = Task.objects.filter(campaign=campaign).order_by("pk").first()
    skill = task.response.item.item_skills.order_by("rank").first()
    _preference(task, ann, skill=skill.skill, choice="b")
    _preference(task, bob, choice="tie")
    _preference(Task.objects.filter(campaign=campaign).order_by("pk")[1], ann, status="expired")
    _preference(Task.objects.filter(campaign=other).order_by("pk").first(), ann)
    rows = human_preference_rows(project=project, campaign_ids=[campaign.pk])
    assert [(r.annotator, r.skill, r.choice) for r in rows] == [
        ("ann", skill.skill.name, "b"),
        ("bob", None, "tie"),
    ]
    row = rows[0]
    assert row.campaign_id == campaign.pk
    assert (row.response_a_id, row.response_b_id) == (task.response_id, task.response_b_id)
    assert (row.model_a, row.model_b) == (task.response.model_name, task.response_b.model_name)
    assert row.item_id == task.response.item_id
    assert row.item_external_id == task.response.item.external_id
    assert row.b_left == task.b_left
    assert (row.annotator_id, row.strength, row.rationale, row.time_ms) == (
        ann.pk,
        2,
        "clearer",
        1200,
    )
    assert row.submitted_at is not None
    assert len(human_preference_rows(project=project)) == 3


# --- the campaign form ------------------------------------------------------------------------


def test_the_campaign_form_creates_a_pairwise_campaign(researcher_client, project, dataset):
    data = create_data(
        dataset,
        mode="pairwise",
        pair_design="anchor",
        pair_anchor="m-alpha",
        pair_choices=["a", "b", "tie", "both_bad"],
        pair_ask="overall",
        pair_strength="on",
    )
    response = researcher_client.post(url("campaign-create", project.slug), data)
    campaign = Campaign.objects.get(name="Round 1")
    assert response.status_code == 302
    assert (campaign.mode, campaign.pair_design, campaign.pair_anchor) == (
        "pairwise",
        "anchor",
        "m-alpha",
    )
    assert campaign.pair_choices == ["a", "b", "tie", "both_bad"]
    assert (campaign.pair_ask, campaign.pair_strength, campaign.pair_rationale) == (
        "overall",
        True,
        False,
    )
    assert campaign.pair_budget is None
    page = researcher_client.get(url("campaign-update", campaign.pk)).content.decode()
    assert 'value="pairwise"' in page and 'id="pair-settings"' in page
    detail = researcher_client.get(url("campaign-detail", campaign.pk)).content.decode()
    assert "annotators per pair" in detail
    assert "Pairwise: each model against an anchor model" in detail and "m-alpha" in detail


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"pair_design": "sampled"}, "give a budget"),
        ({"pair_design": "anchor"}, "name the anchor model"),
        ({"pair_design": "anchor", "pair_anchor": "m-zulu"}, "not one of the compared models"),
        ({"pair_choices": ["a"]}, "tick at least two choices"),
        ({"pair_design": "sampled", "pair_budget": "999"}, "more than the 36 pairs"),
    ],
)
def test_the_campaign_form_answers_bad_pairwise_settings_with_200_and_the_reason(
    researcher_client, project, dataset, extra, message
):
    data = create_data(dataset, mode="pairwise", pair_choices=["a", "b"]) | extra
    response = researcher_client.post(url("campaign-create", project.slug), data)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Campaign.objects.exists()


# --- the campaign API -------------------------------------------------------------------------


def test_the_campaign_api_creates_a_pairwise_campaign_and_reports_its_settings(
    researcher, project, dataset
):
    client = token_client(researcher)
    body = {
        "name": "API pairs",
        "dataset": dataset.pk,
        "mode": "pairwise",
        "pair_design": "sampled",
        "pair_budget": 10,
        "pair_choices": ["a", "b", "both_bad"],
        "pair_ask": "skills",
        "pair_rationale": True,
    }
    created = client.post(
        f"/api/v1/annotation/projects/{project.slug}/campaigns/", body, format="json"
    )
    assert created.status_code == 201, created.content
    data = created.json()
    assert {k: data[k] for k in body if k not in ("name", "dataset")} == {
        k: v for k, v in body.items() if k not in ("name", "dataset")
    }
    assert (data["pair_anchor"], data["pair_strength"]) == ("", False)
    activated = client.post(f"/api/v1/annotation/campaigns/{data['id']}/activate/")
    assert activated.json()["tasks_created"] == 10


def test_the_campaign_api_answers_bad_pairwise_settings_under_their_fields(
    researcher, project, dataset
):
    client = token_client(researcher)
    body = {"name": "Bad", "dataset": dataset.pk, "mode": "pairwise", "pair_design": "anchor"}
    answer = client.post(
        f"/api/v1/annotation/projects/{project.slug}/campaigns/",
        body | {"pair_anchor": "m-zulu"},
        format="json",
    )
    assert answer.status_code == 400
    assert "not one of the compared models" in str(answer.json()["fields"]["pair_anchor"])
    answer = client.post(
        f"/api/v1/annotation/projects/{project.slug}/campaigns/",
        body | {"pair_choices": ["a", "maybe"]},
        format="json",
    )
    assert answer.status_code == 400 and "pair_choices" in answer.json()["fields"]
    assert not Campaign.objects.exists()
