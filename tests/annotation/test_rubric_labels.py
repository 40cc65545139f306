"""Every rubric version has one unambiguous label, "built-in v1" or "project:<slug> v1"
(annotation.models.rubric_label), shown wherever a version is: the catalogue page and
API, the rubric's version list, the item page, a campaign's pinned versions, the long
export (a `rubric_label` column after the others) and the judge's judgments (page and API).
A project's first edit is version 1 like the built-in rubric it came from: the number
alone cannot tell them apart."""

# ruff: noqa: F811  (fixtures imported from other test modules)
from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.catalogue.services import rubric_revise
from annotation.models import Rubric, Skill, rubric_label
from annotation.services.assignments import assignment_claim_next, human_score_submit
from tests.analytics.test_exports import export_text, scored  # noqa: F401  (fixture)
from tests.annotation.test_assignments import full_scores, make_dataset
from tests.clients import token_client


@pytest.fixture
def edited(project):
    """Factuality edited in the project: its version 1, beside the built-in version 1."""
    skill = Skill.objects.get(name="Factuality", project__isnull=True)
    return rubric_revise(
        skill=skill,
        project=project,
        criterion="Are the facts right?",
        anchors=[f"level {n}" for n in range(1, 6)],
    )


def test_the_label_tells_a_project_version_from_the_built_in_one(project, edited):
    builtin = Rubric.objects.get(skill=edited.skill, project__isnull=True, version=1)
    assert edited.version == builtin.version == 1
    assert builtin.label == "built-in v1"
    assert edited.label == f"project:{project.slug} v1"
    assert rubric_label(project_slug=None, version=3) == "built-in v3"
    assert str(edited) == f"Factuality project:{project.slug} v1"


def test_the_catalogue_page_and_api_show_the_label(project, edited, researcher, researcher_client):
    page = researcher_client.get(reverse("annotation:catalogue"), {"project": project.slug})
    body = page.content.decode()
    assert f"project:{project.slug} v1" in body and "built-in v1" in body
    rows = token_client(researcher).get("/api/v1/annotation/skills/", {"project": project.slug})
    by_name = {r["name"]: r for r in rows.json()}
    assert by_name["Factuality"]["rubric_label"] == f"project:{project.slug} v1"
    assert by_name["Factuality"]["rubric_version"] == 1  # kept as it was
    assert by_name["Readability"]["rubric_label"] == "built-in v1"


def test_the_rubric_page_lists_both_versions_by_label(project, edited, researcher_client):
    url = reverse("annotation:rubric-edit", args=[edited.skill_id]) + f"?project={project.slug}"
    body = researcher_client.get(url).content.decode()
    assert f"<td>project:{project.slug} v1</td>" in body and "<td>built-in v1</td>" in body


def test_the_item_page_and_the_campaign_page_show_the_label(
    project, edited, tmp_path, researcher_client, django_user_model
):
    dataset = make_dataset(project, tmp_path)
    item = dataset.items.get(external_id="i0")
    page = researcher_client.get(reverse("annotation:item-detail", args=[item.pk]))
    assert f"rubric project:{project.slug} v1" in page.content.decode()
    campaign = campaign_create(project=project, dataset=dataset, name="C", overlap=1)
    campaign_activate(campaign=campaign)
    body = researcher_client.get(reverse("annotation:campaign-detail", args=[campaign.pk]))
    pins = body.content.decode().split('id="pinned-rubrics"')[1].split("</table>")[0]
    assert f"<td>Factuality</td><td>project:{project.slug} v1</td>" in pins
    assert "<td>Readability</td><td>built-in v1</td>" in pins


def test_the_long_export_has_a_rubric_label_column(project, edited, tmp_path, django_user_model):
    # given: a campaign scored under the project's Factuality v1 and the built-in others
    dataset = make_dataset(project, tmp_path, items=1, models=("m1",))
    ann = django_user_model.objects.create_user("ann", password="x")
    campaign = campaign_create(
        project=project, dataset=dataset, name="C", overlap=1, annotators=[ann]
    )
    campaign_activate(campaign=campaign)
    lease = assignment_claim_next(campaign=campaign, annotator=ann)
    human_score_submit(assignment_id=lease.pk, annotator=ann, scores=full_scores(lease))
    # when
    rows = list(csv.DictReader(io.StringIO(export_text(project, "long", "csv"))))
    # then: the same version number, told apart by the new column; the old ones are kept
    by_skill = {r["skill"]: r for r in rows}
    assert by_skill["Factuality"]["rubric_version"] == by_skill["Readability"]["rubric_version"]
    assert by_skill["Factuality"]["rubric_label"] == f"project:{project.slug} v1"
    assert by_skill["Readability"]["rubric_label"] == "built-in v1"
    assert list(rows[0])[17] == "rubric_label"  # the 18th column; later ones follow it


def test_the_judgment_page_and_api_show_the_rubric_label(scored, researcher, researcher_client):
    judgment = scored.run.judgments.first()
    page = researcher_client.get(reverse("judging:judgment-detail", args=[judgment.pk]))
    assert "<td>built-in v1</td>" in page.content.decode()
    listed = token_client(researcher).get(f"/api/v1/judging/runs/{scored.run.pk}/judgments/")
    first = listed.json()["results"][0]
    assert first["rubrics"] and set(first["rubrics"].values()) == {"built-in v1"}
