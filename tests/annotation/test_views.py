"""Pages of the annotation app: happy path, ownership, method, htmx partial vs full page."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import DatasetUpload, Rubric, Skill, UploadSource, UploadStatus

ITEMS = (
    b'{"id": "q1", "instruction": "Say **hi**", "reference": "hi", '
    b'"skills": ["Readability", "Conciseness", "Comprehension"], "domains": ["Language"], '
    b'"difficulty": 1, "responses": [{"model": "m-one", "text": "<script>alert(1)</script> hi"}]}\n'
    b'{"id": "q2", "instruction": "Count to three", "skills": ["Logical Correctness", '
    b'"Conciseness", "Comprehension"], "domains": ["Math"], "difficulty": 2}\n'
)


@pytest.fixture
def dataset(project, tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_bytes(ITEMS)
    upload = dataset_upload_create(
        project=project,
        dataset_name="Views set",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED
    return upload.dataset


def test_it_redirects_anonymous_visitors_to_login(client, project):
    response = client.get(reverse("annotation:project-detail", args=[project.slug]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_lists_projects_for_members_only(researcher_client, outsider_client, project):
    assert project.name in researcher_client.get(reverse("annotation:home")).content.decode()
    assert project.name not in outsider_client.get(reverse("annotation:home")).content.decode()


def test_it_hides_a_project_from_non_members(outsider_client, project):
    url = reverse("annotation:project-detail", args=[project.slug])
    assert outsider_client.get(url).status_code == 404


def test_it_shows_the_dataset_page_in_full_and_the_item_list_as_a_partial(
    researcher_client, dataset
):
    url = reverse("annotation:dataset-detail", args=[dataset.pk])
    # when
    full = researcher_client.get(url)
    partial = researcher_client.get(url, headers={"HX-Request": "true"})
    # then
    assert full.status_code == partial.status_code == 200
    assert b"<html" in full.content and b"q1" in full.content
    assert b"<html" not in partial.content and b'id="item-list"' in partial.content


def test_it_filters_items_by_difficulty_and_skill(researcher_client, dataset):
    url = reverse("annotation:dataset-detail", args=[dataset.pk])
    skill = Skill.objects.get(name="Logical Correctness", project__isnull=True)
    body = researcher_client.get(url, {"difficulty": 1}, headers={"HX-Request": "true"})
    assert b"q1" in body.content and b"q2" not in body.content
    body = researcher_client.get(url, {"skill": skill.pk}, headers={"HX-Request": "true"})
    assert b"q2" in body.content and b"q1" not in body.content


def test_the_dataset_page_is_404_for_another_projects_researcher(outsider_client, dataset):
    url = reverse("annotation:dataset-detail", args=[dataset.pk])
    assert outsider_client.get(url).status_code == 404


def test_annotators_may_not_browse_datasets_with_model_names(annotator_client, dataset):
    url = reverse("annotation:dataset-detail", args=[dataset.pk])
    assert annotator_client.get(url).status_code == 403
    item = dataset.items.get(external_id="q1")
    assert (
        annotator_client.get(reverse("annotation:item-detail", args=[item.pk])).status_code == 403
    )


def test_the_item_page_renders_responses_escaped_with_the_rubric(researcher_client, dataset):
    item = dataset.items.get(external_id="q1")
    body = researcher_client.get(reverse("annotation:item-detail", args=[item.pk])).content
    assert b"<script>alert(1)</script>" not in body
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert b"<strong>hi</strong>" in body  # instruction Markdown rendered
    readability = Rubric.objects.get(skill__name="Readability", project__isnull=True)
    assert readability.anchor_5.encode() in body.replace(b"&#x27;", b"'").replace(b"&quot;", b'"')


@pytest.mark.parametrize("name", ["annotation:home", "annotation:catalogue"])
def test_get_only_pages_refuse_post(researcher_client, name):
    assert researcher_client.post(reverse(name)).status_code == 405


def test_the_upload_page_is_for_the_projects_staff(
    researcher_client, annotator_client, admin_client, project
):
    url = reverse("annotation:upload-create", args=[project.slug])
    assert annotator_client.get(url).status_code == 403
    assert researcher_client.get(url).status_code == 200
    assert admin_client.get(url).status_code == 200
    assert admin_client.put(url).status_code == 405


def test_a_web_upload_creates_a_pending_job_and_enqueues_it_after_commit(
    admin_client, project, django_capture_on_commit_callbacks, monkeypatch
):
    # given
    sent = []
    monkeypatch.setattr("annotation.tasks.dataset_import_task.delay", sent.append)
    url = reverse("annotation:upload-create", args=[project.slug])
    # when
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            url,
            {
                "dataset": "Web set",
                "files": [SimpleUploadedFile("items.jsonl", ITEMS)],
                "format": "",
                "preset": "flask-release",
                "on_skill_count": "reject",
            },
        )
    # then
    upload = DatasetUpload.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("annotation:upload-detail", args=[upload.pk])
    assert upload.status == UploadStatus.PENDING and upload.source == UploadSource.WEB
    assert upload.options["policies"] == {
        "invalid_difficulty": "accept",
        "invalid_domain": "accept",
        "empty_response": "accept",
        "skill_count": "reject",
    }
    assert sent == [upload.pk]


def test_an_upload_form_with_errors_is_answered_200_and_creates_nothing(admin_client, project):
    url = reverse("annotation:upload-create", args=[project.slug])
    response = admin_client.post(url, {"dataset": "", "format": "nonsense"})
    assert response.status_code == 200
    assert b"choose at least one file" in response.content or b"required" in response.content
    assert not DatasetUpload.objects.exists()


def test_the_upload_progress_partial_stops_polling_when_finished(admin_client, dataset):
    upload = DatasetUpload.objects.get(dataset=dataset)
    url = reverse("annotation:upload-detail", args=[upload.pk])
    partial = admin_client.get(url, headers={"HX-Request": "true"})
    full = admin_client.get(url)
    assert partial.status_code == 286
    assert b"<html" not in partial.content and b"Succeeded" in partial.content
    assert full.status_code == 200 and b"<html" in full.content


def test_a_running_upload_keeps_polling(admin_client, project):
    upload = DatasetUpload.objects.create(
        project=project, dataset_name="x", source=UploadSource.WEB, status=UploadStatus.RUNNING
    )
    url = reverse("annotation:upload-detail", args=[upload.pk])
    partial = admin_client.get(url, headers={"HX-Request": "true"})
    assert partial.status_code == 200
    assert b'hx-trigger="every 1s"' in partial.content


def test_the_upload_page_is_404_for_outsiders(outsider_client, dataset):
    upload = DatasetUpload.objects.get(dataset=dataset)
    url = reverse("annotation:upload-detail", args=[upload.pk])
    assert outsider_client.get(url).status_code == 404


def test_editing_a_rubric_in_a_project_creates_a_project_version(researcher_client, project):
    skill = Skill.objects.get(name="Factuality", project__isnull=True)
    url = reverse("annotation:rubric-edit", args=[skill.pk]) + f"?project={project.slug}"
    form = {"project": project.slug, "criterion": "Are the facts right?", "note": "shorter"}
    form.update({f"anchor_{n}": f"level {n} wording" for n in range(1, 6)})
    # when
    response = researcher_client.post(url, form)
    # then
    assert response.status_code == 302
    own = Rubric.objects.get(skill=skill, project=project)
    assert own.version == 1 and own.criterion == "Are the facts right?"
    assert Rubric.objects.filter(skill=skill, project__isnull=True).count() == 1
    catalogue = researcher_client.get(reverse("annotation:catalogue"), {"project": project.slug})
    assert b"Are the facts right?" in catalogue.content


def test_only_site_admins_edit_builtin_wording(researcher_client, admin_client):
    skill = Skill.objects.get(name="Factuality", project__isnull=True)
    url = reverse("annotation:rubric-edit", args=[skill.pk])
    assert researcher_client.get(url).status_code == 403
    assert admin_client.get(url).status_code == 200


def test_a_custom_skill_can_be_added_to_a_project(researcher_client, project):
    url = reverse("annotation:skill-add", args=[project.slug])
    form = {"name": "Tone", "ability": "custom", "criterion": "Is the tone right?"}
    form.update({f"anchor_{n}": f"tone level {n}" for n in range(1, 6)})
    assert researcher_client.post(url, form).status_code == 302
    assert Skill.objects.get(name="Tone").project == project
    again = researcher_client.post(url, form)
    assert again.status_code == 200 and b"already exists" in again.content


def test_a_broken_rubric_file_is_reported_on_the_form(researcher_client, project):
    url = reverse("annotation:rubric-import", args=[project.slug])
    bad = SimpleUploadedFile("skills.json", b'[{"Skill": "X"}]')
    response = researcher_client.post(url, {"file": bad})
    assert response.status_code == 200
    assert b"Criteria" in response.content
    assert not Rubric.objects.filter(project=project).exists()
