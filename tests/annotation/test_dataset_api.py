"""The staff's read API: a dataset's composition, its items with filters, one item with its
responses, and a campaign's assignments with their scores."""

from __future__ import annotations

import pytest

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import Item
from annotation.services.assignments import assignment_claim_next, assignment_skip
from tests.annotation.test_campaign_selectors import SKILLS, make_annotator, make_dataset, submit
from tests.clients import token_client

BASE = "/api/v1/annotation"


api = token_client


@pytest.fixture
def dataset(project, tmp_path):
    # 3 items × m1, m2; items 0 and 2 are History, item 1 Math; all difficulty 2
    return make_dataset(project, tmp_path)


@pytest.fixture
def rita(researcher):
    return api(researcher)


def test_a_dataset_reads_with_its_composition(rita, dataset, project):
    body = rita.get(f"{BASE}/datasets/{dataset.pk}/").json()
    assert body["name"] == dataset.name and body["project"] == project.slug
    assert (body["items"], body["responses"]) == (3, 6)
    assert body["models"] == [{"name": "m1", "n": 3}, {"name": "m2", "n": 3}]
    assert sorted(body["skills"], key=lambda r: r["name"]) == [
        {"name": name, "n": 3} for name in sorted(SKILLS)
    ]
    assert body["domains"] == [{"name": "History", "n": 2}, {"name": "Math", "n": 1}]
    assert body["difficulty"] == [{"level": 2, "n": 3}]


def test_items_page_and_filter_by_names(rita, dataset):
    url = f"{BASE}/datasets/{dataset.pk}/items/"
    everything = rita.get(url).json()
    assert everything["count"] == 3
    first = everything["results"][0]
    assert first["external_id"] == "i0" and first["response_count"] == 2
    assert [s["name"] for s in first["skills"]] == SKILLS and first["domains"] == ["History"]
    assert [r["external_id"] for r in rita.get(url, {"domain": "Math"}).json()["results"]] == ["i1"]
    assert rita.get(url, {"q": "i2"}).json()["count"] == 1
    assert rita.get(url, {"skill": "Factuality", "difficulty": 2}).json()["count"] == 3
    assert rita.get(url, {"difficulty": 5}).json()["count"] == 0
    bad = rita.get(url, {"skill": "Telepathy", "domain": "Cooking", "difficulty": 9})
    assert bad.status_code == 400
    assert set(bad.json()["fields"]) == {"difficulty"}  # the field checks come first
    bad = rita.get(url, {"skill": "Telepathy", "domain": "Cooking"})
    assert bad.json()["fields"] == {
        "skill": ["no skill named Telepathy in this project"],
        "domain": ["no domain named Cooking in this project"],
    }


def test_an_item_reads_with_every_response(rita, dataset):
    item = Item.objects.get(dataset=dataset, external_id="i1")
    body = rita.get(f"{BASE}/items/{item.pk}/").json()
    assert body["instruction"] == "Question 1" and body["external_id"] == "i1"
    assert [(r["model"], r["text"]) for r in body["responses"]] == [
        ("m1", "m1 says 1"),
        ("m2", "m2 says 1"),
    ]
    assert "response_count" not in body


def test_the_reads_are_for_staff(dataset, annotator, outsider):
    item = Item.objects.filter(dataset=dataset).first()
    for path in (f"datasets/{dataset.pk}/", f"datasets/{dataset.pk}/items/", f"items/{item.pk}/"):
        assert api(annotator).get(f"{BASE}/{path}").status_code == 403
        assert api(outsider).get(f"{BASE}/{path}").status_code == 404


def test_a_campaigns_assignments_show_who_what_and_the_scores(
    rita, project, dataset, annotator, django_user_model
):
    # given alice submitted one task (Readability N/A) and holds a second; bob skipped one
    bob = make_annotator(django_user_model, project, "bob")
    campaign = campaign_create(
        project=project, dataset=dataset, name="P", annotators=[annotator, bob]
    )
    campaign_activate(campaign=campaign)
    done = submit(campaign, annotator, {"Readability": None, "Factuality": 2})
    held = assignment_claim_next(campaign=campaign, annotator=annotator)
    skipped = assignment_claim_next(campaign=campaign, annotator=bob)
    assignment_skip(assignment_id=skipped.pk, annotator=bob, reason="unclear", flag=True)
    url = f"{BASE}/campaigns/{campaign.pk}/assignments/"
    # when
    body = rita.get(url).json()
    # then: newest first
    assert [r["id"] for r in body["results"]] == [skipped.pk, held.pk, done.pk]
    row = body["results"][2]
    assert row["annotator"] == "alice" and row["status"] == "submitted"
    assert row["model"] == done.task.response.model_name
    assert row["item"] == done.task.response.item.external_id
    assert row["scores"] == {"Factuality": 2, "Comprehension": 4, "Readability": "N/A"}
    assert body["results"][1]["scores"] == {} and body["results"][1]["status"] == "active"
    assert body["results"][0]["flagged"] and body["results"][0]["skip_reason"] == "unclear"
    # filters
    assert [r["id"] for r in rita.get(url, {"annotator": "bob"}).json()["results"]] == [skipped.pk]
    assert [r["id"] for r in rita.get(url, {"status": "active"}).json()["results"]] == [held.pk]
    assert rita.get(url, {"flagged": "true"}).json()["count"] == 1
    assert rita.get(url, {"flagged": "false"}).json()["count"] == 2
    assert rita.get(url, {"status": "lost"}).status_code == 400


def test_the_assignment_list_runs_a_fixed_number_of_queries(
    rita, project, dataset, annotator, django_user_model, django_assert_max_num_queries
):
    users = [annotator] + [make_annotator(django_user_model, project, f"u{n}") for n in range(4)]
    campaign = campaign_create(project=project, dataset=dataset, name="P", annotators=users)
    campaign_activate(campaign=campaign)
    for user in users:
        submit(campaign, user)
    # token lookup, campaign, role, count, page, scores
    with django_assert_max_num_queries(8):
        body = rita.get(f"{BASE}/campaigns/{campaign.pk}/assignments/").json()
    assert body["count"] == 5 and all(len(r["scores"]) == 3 for r in body["results"])
