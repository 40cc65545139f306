"""REST API of the annotation app: token auth, JSON errors, the import job lifecycle."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from annotation.datasets.services import dataset_import
from annotation.models import DatasetUpload, Project, UploadStatus
from tests.clients import token_client

ROW = (
    b'{"id": "a1", "instruction": "Name a colour", "skills": ["Factuality", "Conciseness", '
    b'"Readability"], "domains": ["Culture"], "difficulty": "simple lifestyle knowledge"}\n'
)


_api = token_client


@pytest.fixture
def admin_api(admin_user):
    return _api(admin_user)


def test_anonymous_requests_get_a_json_401(db):
    response = APIClient().get("/api/v1/annotation/projects/")
    assert response.status_code == 401
    assert "detail" in response.json()


def test_projects_are_listed_for_members_only(project, researcher, outsider):
    assert _api(researcher).get("/api/v1/annotation/projects/").json()["count"] == 1
    assert _api(outsider).get("/api/v1/annotation/projects/").json()["count"] == 0


def test_site_admins_create_projects_others_may_not(admin_api, researcher):
    url = "/api/v1/annotation/projects/"
    body = {"slug": "new-study", "name": "New study", "description": "A pilot."}
    assert _api(researcher).post(url, body, format="json").status_code == 403
    assert not Project.objects.filter(slug="new-study").exists()
    created = admin_api.post(url, body, format="json")
    assert created.status_code == 201
    assert created.json() == {"slug": "new-study", "name": "New study", "description": "A pilot."}
    again = admin_api.post(url, {"slug": "new-study"}, format="json")
    assert again.status_code == 400
    assert again.json()["fields"] == {"slug": ["a project with this slug exists"]}
    bad = admin_api.post(url, {"slug": "no spaces"}, format="json")
    assert bad.status_code == 400 and "slug" in bad.json()["fields"]
    assert Project.objects.filter(slug="new-study").count() == 1


def test_the_skill_catalogue_lists_twelve_builtin_skills_with_anchors(researcher, project):
    rows = _api(researcher).get("/api/v1/annotation/skills/", {"project": project.slug}).json()
    assert len(rows) == 12
    assert all(len(r["anchors"]) == 5 and r["rubric_version"] == 1 for r in rows)
    assert {r["ability"] for r in rows} == {
        "logical_thinking",
        "background_knowledge",
        "problem_handling",
        "user_alignment",
    }


def test_an_upload_is_accepted_then_imported(
    admin_api, project, django_capture_on_commit_callbacks, monkeypatch
):
    # given
    sent = []
    monkeypatch.setattr("annotation.tasks.dataset_import_task.delay", sent.append)
    # when
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_api.post(
            "/api/v1/annotation/uploads/",
            {
                "project": project.slug,
                "dataset": "Api set",
                "files": [SimpleUploadedFile("rows.jsonl", ROW)],
                "policies": '{"skill_count": "accept"}',
            },
            format="multipart",
        )
    # then
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "pending" and sent == [body["id"]]
    dataset_import(upload_id=body["id"])  # what the worker does
    detail = admin_api.get(f"/api/v1/annotation/uploads/{body['id']}/").json()
    assert detail["status"] == "succeeded" and detail["items_created"] == 1
    assert DatasetUpload.objects.get().options["policies"] == {"skill_count": "accept"}


def test_a_rejected_upload_lists_its_problems(admin_api, project):
    bad = b'{"id": "b1", "instruction": "x", "skills": ["Factuality"], "difficulty": 9}\n'
    response = admin_api.post(
        "/api/v1/annotation/uploads/",
        {"project": project.slug, "dataset": "Bad", "files": [SimpleUploadedFile("b.jsonl", bad)]},
        format="multipart",
    )
    dataset_import(upload_id=response.json()["id"])
    detail = admin_api.get(f"/api/v1/annotation/uploads/{response.json()['id']}/").json()
    assert detail["status"] == UploadStatus.REJECTED
    codes = {p["code"] for p in detail["problems"]}
    assert codes == {"invalid_difficulty", "skill_count"}
    assert all(p["line"] == 1 and p["file_name"] == "b.jsonl" for p in detail["problems"])


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"dataset": "x"}, "files"),
        ({"files": "missing-project"}, "project"),
        ({"format": "yaml"}, "format"),
        ({"policies": '{"nonsense": "skip"}'}, "policies"),
        ({"policies": '{"invalid_json": "accept"}'}, "policies"),
        ({"policies": "not json"}, "policies"),
        ({"preset": "sloppy"}, "preset"),
    ],
)
def test_bad_upload_requests_get_field_errors_and_change_nothing(
    admin_api, project, payload, field
):
    data = {"project": project.slug, "dataset": "D", "files": [SimpleUploadedFile("r.jsonl", ROW)]}
    data.update(payload)
    if payload.get("files") == "missing-project":
        data.pop("project")
        data["files"] = [SimpleUploadedFile("r.jsonl", ROW)]
    if field == "files":
        data.pop("files")
    response = admin_api.post("/api/v1/annotation/uploads/", data, format="multipart")
    assert response.status_code == 400
    assert field in response.json()
    assert not DatasetUpload.objects.exists()


def test_researchers_start_imports_annotators_cannot_and_outsiders_do_not_see_the_project(
    researcher, annotator, outsider, project
):
    def post(user):
        data = {
            "project": project.slug,
            "dataset": "D",
            "files": [SimpleUploadedFile("r.jsonl", ROW)],
        }
        return _api(user).post("/api/v1/annotation/uploads/", data, format="multipart")

    assert post(annotator).status_code == 403
    assert post(outsider).status_code == 404
    assert not DatasetUpload.objects.exists()
    started = post(researcher)
    assert started.status_code == 202
    assert DatasetUpload.objects.get().created_by == researcher
    detail = _api(researcher).get(f"/api/v1/annotation/uploads/{started.json()['id']}/")
    assert detail.status_code == 200 and detail.json()["dataset_name"] == "D"


def test_the_openapi_schema_is_served(admin_api):
    response = admin_api.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    assert "/api/v1/annotation/uploads/" in response.json()["paths"]
