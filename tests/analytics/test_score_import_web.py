"""The web faces of the long-format score import: the upload page and the REST API. The
importer's rules themselves are tested in test_score_import.py; here: access, the request
shapes, errors that list every problem and change nothing, and repeats."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from analytics.models import ImportedScore, ScoreImport
from annotation.models import Item, Project, Response
from tests.clients import token_client

pytestmark = pytest.mark.django_db

GOOD = (
    b"item,system,rater,rater_kind,skill,score\n"
    b"q1,model-a,ann1,human,Readability,4\n"
    b"q1,model-a,ann2,human,Readability,N/A\n"
    b"q1,model-a,gpt-judge,judge,Readability,5\n"
    b"q2,model-b,ann1,human,Readability,2\n"
)
BAD = (
    b"item,system,rater,rater_kind,skill,score\n"
    b"q1,model-a,ann1,human,Readability,7\n"
    b"q1,model-a,ann2,robot,Readability,3\n"
)


def upload(data: bytes, name: str = "scores.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="text/csv")


def state() -> tuple[int, int, int, int, int]:
    return (
        ImportedScore.objects.count(),
        ScoreImport.objects.count(),
        Item.objects.count(),
        Response.objects.count(),
        Project.objects.count(),
    )


api_client = token_client


# --- the page --------------------------------------------------------------------------------


def page_url(project) -> str:
    return f"/projects/{project.slug}/analytics/scores/import/"


def test_the_page_imports_and_lists_the_import(researcher_client, project):
    response = researcher_client.post(page_url(project), {"files": [upload(GOOD)]}, follow=True)
    assert response.status_code == 200
    batch = ScoreImport.objects.get()
    assert batch.scores_created == 4
    assert batch.created_by.username == "rita"
    html = response.content.decode()
    assert f"Score import {batch.pk}: 4 new scores" in html
    assert 'id="score-imports"' in html and "scores.csv (4 rows)" in html


def test_the_page_lists_every_problem_and_writes_nothing(researcher_client, project):
    before = state()
    response = researcher_client.post(page_url(project), {"files": [upload(BAD)]})
    assert response.status_code == 400
    assert state() == before
    html = response.content.decode()
    assert "2 problems" in html
    assert "rater_kind" in html  # the field of the second row's problem
    assert "nothing was written" in html


def test_the_page_applies_declared_scales(researcher_client, project):
    data = b"item,system,rater,rater_kind,skill,score\nq1,m,ann1,human,Fluency,0.25\n"
    response = researcher_client.post(
        page_url(project), {"files": [upload(data)], "scales": "Fluency=0:1:continuous\n"}
    )
    assert response.status_code == 302
    assert ImportedScore.objects.get().value == 0.25


def test_the_same_file_twice_writes_nothing_the_second_time(researcher_client, project):
    researcher_client.post(page_url(project), {"files": [upload(GOOD)]})
    before = state()
    response = researcher_client.post(page_url(project), {"files": [upload(GOOD)]}, follow=True)
    assert state() == before
    assert "were imported before" in response.content.decode()


def test_the_page_escapes_what_the_file_says(researcher_client, project):
    evil = b'item,system,rater,rater_kind,skill,score\n"<script>x()</script>",m,a,human,R,9\n'
    response = researcher_client.post(page_url(project), {"files": [upload(evil, "<b>.csv")]})
    html = response.content.decode()
    assert "<script>x()</script>" not in html and "<b>.csv" not in html
    assert "&lt;b&gt;.csv" in html


@pytest.mark.parametrize(
    ("persona", "status"),
    [("annotator_client", 403), ("outsider_client", 404), ("client", 302)],
)
def test_only_project_staff_reach_the_page(request, project, persona, status):
    client = request.getfixturevalue(persona)
    before = state()
    assert client.get(page_url(project)).status_code == status
    assert client.post(page_url(project), {"files": [upload(GOOD)]}).status_code == status
    assert state() == before


# --- the API ---------------------------------------------------------------------------------

API = "/api/v1/projects"


def test_the_api_imports_with_201_then_200_for_the_same_bytes(researcher, project):
    client = api_client(researcher)
    url = f"{API}/{project.slug}/scores/import/"
    first = client.post(url, {"files": [upload(GOOD)], "dataset": "Crowd"}, format="multipart")
    assert first.status_code == 201, first.json()
    body = first.json()
    assert body["batch"]["scores_created"] == 4
    assert body["batch"]["dataset"] == "Crowd"
    assert body["dataset_created"] is True and body["already_imported"] is False
    again = client.post(url, {"files": [upload(GOOD)], "dataset": "Crowd"}, format="multipart")
    assert again.status_code == 200 and again.json()["already_imported"] is True
    listed = client.get(f"{API}/{project.slug}/scores/imports/").json()
    assert [b["id"] for b in listed] == [body["batch"]["id"]]


def test_the_api_rejects_with_every_problem_and_changes_nothing(researcher, project):
    before = state()
    response = api_client(researcher).post(
        f"{API}/{project.slug}/scores/import/", {"files": [upload(BAD)]}, format="multipart"
    )
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "rejected" and body["problem_count"] == 2
    assert {(p["line"], p["field"]) for p in body["problems"]} >= {(3, "rater_kind")}
    assert state() == before


def test_the_api_reads_repeated_scale_options(researcher, project):
    data = (
        b"item,system,rater,rater_kind,skill,score\n"
        b"q1,m,ann1,human,Fluency,0.5\nq1,m,bleu,judge,Fluency,37.5\n"
    )
    response = api_client(researcher).post(
        f"{API}/{project.slug}/scores/import/",
        {"files": [upload(data)], "scale": ["Fluency=0:1:continuous"], "judge_scale": "raw"},
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    assert sorted(ImportedScore.objects.values_list("value", flat=True)) == [0.5, 37.5]


def test_the_api_explains_a_request_without_files(researcher, project):
    response = api_client(researcher).post(
        f"{API}/{project.slug}/scores/import/", {"judge_scale": "maybe"}, format="multipart"
    )
    assert response.status_code == 400
    fields = {p["field"] for p in response.json()["problems"]}
    assert fields == {"files", "judge_scale"}


def test_only_site_admins_create_projects_through_the_api(researcher, admin_user):
    url = f"{API}/new-study/scores/import/"

    def body():
        return {"files": [upload(GOOD)], "create_project": "true"}

    assert api_client(researcher).post(url, body(), format="multipart").status_code == 404
    assert not Project.objects.filter(slug="new-study").exists()
    created = api_client(admin_user).post(url, body(), format="multipart")
    assert created.status_code == 201 and created.json()["project_created"] is True
    assert ImportedScore.objects.filter(project__slug="new-study").count() == 4


def test_annotators_and_outsiders_cannot_import(annotator, outsider, project):
    url = f"{API}/{project.slug}/scores/import/"
    before = state()
    statuses = [
        api_client(user).post(url, {"files": [upload(GOOD)]}, format="multipart").status_code
        for user in (annotator, outsider)
    ]
    assert statuses == [403, 404]
    assert APIClient().post(url, {"files": [upload(GOOD)]}).status_code in (401, 403)
    assert state() == before
