"""The dataset page's and API's item filters: a skill or domain by name (any case) or by
id, a difficulty by level or label, and a value that names nothing said out loud (the page
lists nothing and says which filter is unknown; the API answers 400 by field) instead of
being quietly ignored."""

# ruff: noqa: F811  (the dataset fixture imported from test_views)
from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.datasets.selectors import item_filters_resolve
from annotation.models import Domain, Skill
from tests.annotation.test_views import dataset  # noqa: F401  (fixture)
from tests.clients import token_client


def listed(client, dataset, **params) -> tuple[set[str], str]:
    url = reverse("annotation:dataset-detail", args=[dataset.pk])
    body = client.get(url, params, headers={"HX-Request": "true"}).content.decode()
    return {ext for ext in ("q1", "q2") if f">{ext}</a>" in body}, body


@pytest.mark.parametrize(
    "value", ["Logical Correctness", "logical correctness", " LOGICAL CORRECTNESS ", "id"]
)
def test_the_page_takes_a_skill_by_name_in_any_case_or_by_id(researcher_client, dataset, value):
    skill = Skill.objects.get(name="Logical Correctness", project__isnull=True)
    shown, body = listed(researcher_client, dataset, skill=skill.pk if value == "id" else value)
    assert shown == {"q2"} and 'id="filter-errors"' not in body
    url = reverse("annotation:dataset-detail", args=[dataset.pk])
    full = researcher_client.get(url, {"skill": value if value != "id" else skill.pk})
    assert f'<option value="{skill.pk}" selected>' in full.content.decode()  # what applies


def test_the_page_says_an_unknown_skill_instead_of_listing_every_item(researcher_client, dataset):
    # given: a skill of the catalogue that names nothing here, e.g. a typo
    shown, body = listed(researcher_client, dataset, skill="Metacognitoin")
    # then: nothing listed, and why
    assert shown == set()
    assert 'id="filter-errors"' in body
    assert "Unknown skill filter: no skill named Metacognitoin in this project" in body


def test_the_page_takes_the_demo_skill_names(researcher_client, dataset):
    # Metacognition is a built-in FLASK skill: a name, not an id, and now a filter
    assert Skill.objects.filter(name="Metacognition", project__isnull=True).exists()
    shown, body = listed(researcher_client, dataset, skill="Metacognition")
    assert shown == set() and 'id="filter-errors"' not in body  # no item asks it
    assert "0 items" in body


@pytest.mark.parametrize(
    ("params", "shown", "unknown"),
    [
        ({"domain": "math"}, {"q2"}, None),
        ({"domain": "Cooking"}, set(), "Unknown domain filter: no domain named Cooking"),
        ({"difficulty": "1"}, {"q1"}, None),
        ({"difficulty": "Advanced lifestyle knowledge"}, {"q2"}, None),
        ({"difficulty": "9"}, set(), "Unknown difficulty filter: no difficulty 9"),
        ({"difficulty": "hard"}, set(), "Unknown difficulty filter: no difficulty hard"),
    ],
)
def test_the_other_filters_take_names_and_say_when_a_value_is_unknown(
    researcher_client, dataset, params, shown, unknown
):
    found, body = listed(researcher_client, dataset, **params)
    assert found == shown
    if unknown is None:
        assert 'id="filter-errors"' not in body
    else:
        assert unknown in body


def test_the_full_page_shows_the_unknown_filter_too(researcher_client, dataset):
    url = reverse("annotation:dataset-detail", args=[dataset.pk])
    body = researcher_client.get(url, {"skill": "Telepathy"}).content.decode()
    assert "<html" in body and "no skill named Telepathy in this project" in body


def test_ids_of_another_project_or_unknown_ids_name_nothing(project, dataset):
    language = Domain.objects.get(name="Language")
    resolved = item_filters_resolve(project=project, domain=str(language.pk), skill="999999")
    assert resolved.domain_id == language.pk and resolved.skill_id is None
    assert resolved.errors == {"skill": "no skill named 999999 in this project"}
    assert item_filters_resolve(project=project).errors == {}


def test_the_api_takes_names_in_any_case_and_ids_and_refuses_unknown_values(researcher, dataset):
    api = token_client(researcher)
    url = f"/api/v1/annotation/datasets/{dataset.pk}/items/"
    skill = Skill.objects.get(name="Logical Correctness", project__isnull=True)
    for value in ("logical correctness", str(skill.pk)):
        body = api.get(url, {"skill": value}).json()
        assert [r["external_id"] for r in body["results"]] == ["q2"]
    assert api.get(url, {"domain": "LANGUAGE"}).json()["count"] == 1
    bad = api.get(url, {"skill": "Metacognitoin"})
    assert bad.status_code == 400
    assert bad.json()["fields"] == {"skill": ["no skill named Metacognitoin in this project"]}
