"""The web faces of the preference-label import: the upload page and the REST API, which
store the file and hand it to a background job (the same machinery as score imports). The
importer's rules themselves are tested in test_preference_exports.py; here: the request
reads nothing, the job imports, access, problems that are all listed and change nothing,
hostile files, repeats, and the links to the page."""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.test import APIClient

from analytics.imports.jobs import preference_import_job_run
from analytics.models import ImportedPreference, PreferenceImport, PreferenceImportJob
from annotation.services.projects import project_create
from flaskweb.jobs import JobStatus, job_finish
from tests.annotation.test_assignments import make_dataset
from tests.clients import token_client
from tests.jobs import import_jobs_fixture  # noqa: F401 - the import_jobs fixture

pytestmark = pytest.mark.django_db

HEADER = b"dataset,item,model_a,model_b,rater,skill,choice,strength\n"
GOOD = HEADER + (
    b"D,i0,m1,m2,ext1,Overall,a,2\nD,i1,m1,m2,ext1,Overall,b,\nD,i0,m2,m1,ext2,Factuality,tie,\n"
)
BAD = HEADER + (
    b"D,i0,m1,m2,ext1,Overall,maybe,\n"  # line 2: choice
    b"D,i9,m1,m2,ext1,Overall,a,\n"  # line 3: no such item (two problems)
    b"D,i1,m1,m2,ext1,Nonsense,a,7\n"  # line 4: skill and strength
)


@pytest.fixture(autouse=True)
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path, items=2, models=("m1", "m2"))


def upload(data: bytes, name: str = "prefs.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="text/csv")


def state() -> tuple[int, int, int]:
    return (
        ImportedPreference.objects.count(),
        PreferenceImport.objects.count(),
        PreferenceImportJob.objects.count(),
    )


def page_url(project) -> str:
    return f"/projects/{project.slug}/analytics/preferences/import/"


# --- the page --------------------------------------------------------------------------------


def test_the_request_stores_the_file_and_the_worker_imports_it(
    researcher_client, project, import_jobs
):
    # given: the request only stores the upload; the job is pending and no label is written
    response = import_jobs.post(researcher_client, page_url(project), {"file": upload(GOOD)})
    job = PreferenceImportJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"{page_url(project)}{job.pk}/"
    assert job.status == JobStatus.PENDING and job.files[0]["name"] == "prefs.csv"
    assert state() == (0, 0, 1) and import_jobs.queued == [("preference", job.pk)]
    polling = researcher_client.get(response["Location"]).content.decode()
    assert 'hx-trigger="every 1s"' in polling and "Preference upload" in polling

    # when: the worker's task runs it
    assert import_jobs.run() == [job.pk]

    # then: the labels are stored, and the polled panel says so and stops polling
    job.refresh_from_db()
    batch = PreferenceImport.objects.get()
    assert job.status == JobStatus.SUCCEEDED and job.batch == batch
    assert job.result == {"already_imported": False, "raters": 2, "pairs": 2}
    assert batch.labels_created == 3 and batch.created_by.username == "rita"
    assert ImportedPreference.objects.filter(project=project).count() == 3
    panel = researcher_client.get(response["Location"], headers={"HX-Request": "true"})
    assert panel.status_code == 286
    assert f"Preference import {batch.pk}: <b>3</b> new labels" in panel.content.decode()
    listing = researcher_client.get(page_url(project)).content.decode()
    assert 'id="preference-imports"' in listing and 'id="import-jobs"' in listing


def test_the_page_lists_every_problem_and_writes_nothing(researcher_client, project, import_jobs):
    response = import_jobs.post(researcher_client, page_url(project), {"file": upload(BAD)})
    import_jobs.run()
    assert state()[:2] == (0, 0)
    job = PreferenceImportJob.objects.get()
    assert job.status == JobStatus.REJECTED and job.problem_count == 5
    assert [(p["line"], p["field"], p["code"]) for p in job.problems] == [
        (2, "choice", "invalid_choice"),
        (3, "model_a", "unknown_response"),
        (3, "model_b", "unknown_response"),
        (4, "strength", "invalid_strength"),
        (4, "skill", "unknown_skill"),
    ]
    assert {p["file"] for p in job.problems} == {"prefs.csv"}
    html = researcher_client.get(response["Location"]).content.decode()
    assert "5 problems" in html and 'id="import-problems"' in html
    assert "no response of &#x27;m1&#x27; to item &#x27;i9&#x27;" in html
    assert "nothing was written" in html
    assert not list((settings.MEDIA_ROOT / "preference-imports").rglob("*.csv"))  # deleted


def test_the_same_file_twice_writes_nothing_the_second_time(
    researcher_client, project, import_jobs
):
    import_jobs.post(researcher_client, page_url(project), {"file": upload(GOOD)})
    import_jobs.post(researcher_client, page_url(project), {"file": upload(GOOD, "again.csv")})
    import_jobs.run()
    first, second = PreferenceImportJob.objects.order_by("pk")
    assert first.status == second.status == JobStatus.SUCCEEDED
    assert second.result == {"already_imported": True} and second.batch_id == first.batch_id
    assert state()[:2] == (3, 1)
    page = researcher_client.get(f"{page_url(project)}{second.pk}/").content.decode()
    assert "were imported before" in page


def test_the_page_escapes_what_the_file_says(researcher_client, project, import_jobs):
    evil = HEADER + b'D,"<script>x()</script>",m1,m2,"<img src=x>",Overall,a,\n'
    response = import_jobs.post(
        researcher_client, page_url(project), {"file": upload(evil, "<b>.csv")}
    )
    import_jobs.run()
    html = researcher_client.get(response["Location"]).content.decode()
    assert "<script>x()</script>" not in html and "<b>.csv" not in html
    assert "&lt;script&gt;x()&lt;/script&gt;" in html and "&lt;b&gt;.csv" in html


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("prefs.csv", GOOD)
    return out.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "code"),
    [
        ("prefs.zip", _zip(), "unknown_format"),
        ("prefs.csv", HEADER + b"D,i0,m1,m2,\xff\xfe,Overall,a,\n", "invalid_encoding"),
        ("prefs.csv", HEADER + b"D,i0,m1,m2,nul\x00here,Overall,a,\n", "invalid_type"),
        ("prefs.csv", HEADER + b'D,i0,m1,m2,x,Overall,a,"' + b"y" * 5_000 + b'"\n', "invalid_csv"),
        ("prefs.csv", HEADER + b"D,i0,m1,m2,x,Overall,a,,extra\n", "invalid_csv"),
        # a quote left open in the file's last cell (the fuzzing found it read as a cell)
        (
            "prefs.csv",
            HEADER + b'D,i0,m1,m2,x,Overall,a,1\nD,i1,m2,m1,x,Factuality,b,"\n',
            "invalid_csv",
        ),
        ("prefs.jsonl", b'{"item": "' + b"y" * 5_000 + b'"}\n', "line_too_long"),
        ("prefs.jsonl", b'{"item": ' + b"[" * 200 + b"]" * 200 + b"}\n", "invalid_json"),
        ("prefs.jsonl", b'{"item": "i0", "item": "i1"}\n', "invalid_json"),
        ("prefs.jsonl", b'{"item": "i0", "rater": "a\\u0000b"}\n', "invalid_type"),
        ("prefs.csv", HEADER + b"D,i0,m1,m2,x,Overall,a,1e400\n", "invalid_strength"),
        ("prefs.csv", HEADER, "empty_file"),
    ],
    ids=lambda value: value if isinstance(value, str) and len(value) < 40 else "",
)
def test_a_hostile_file_is_rejected_with_its_problem_never_a_crash(
    researcher_client, project, import_jobs, settings, name, data, code
):
    settings.FLASKWEB_MAX_LINE_BYTES = 4_000
    response = import_jobs.post(researcher_client, page_url(project), {"file": upload(data, name)})
    assert response.status_code == 302
    import_jobs.run()
    job = PreferenceImportJob.objects.get()
    assert job.status == JobStatus.REJECTED, (job.status, job.error)
    assert code in {p["code"] for p in job.problems}, job.problems
    assert state()[:2] == (0, 0)


def test_a_time_past_the_column_range_is_a_problem_of_its_line(project):
    from analytics.imports.preferences import PreferenceImportRejected, preferences_import

    data = b"dataset,item,model_a,model_b,rater,choice,time_on_task_ms\nD,i0,m1,m2,x,a,1e12\n"
    with pytest.raises(PreferenceImportRejected) as caught:
        preferences_import(project=project, data=data, name="t.csv")
    assert caught.value.problems[0].code == "invalid_time"


def test_a_file_over_the_limit_is_refused_by_the_request(
    researcher, researcher_client, project, settings
):
    settings.FLASKWEB_MAX_UPLOAD_BYTES = 100
    page = researcher_client.post(page_url(project), {"file": upload(GOOD * 2)})
    assert page.status_code == 400 and "the limit is 100 bytes" in page.content.decode()
    api = token_client(researcher).post(
        f"{API}/{project.slug}/preferences/import/", {"file": upload(GOOD * 2)}, format="multipart"
    )
    assert api.status_code == 400 and api.json()["code"] == "too_large"
    assert state() == (0, 0, 0)


def test_a_job_page_of_another_project_is_not_found(researcher_client, project):
    other = project_create(slug="elsewhere")
    job = PreferenceImportJob.objects.create(project=other)
    assert researcher_client.get(f"{page_url(project)}{job.pk}/").status_code == 404
    assert researcher_client.get(f"{page_url(other)}{job.pk}/").status_code == 404


@pytest.mark.parametrize(
    ("persona", "status"),
    [("annotator_client", 403), ("outsider_client", 404), ("client", 302)],
)
def test_only_project_staff_reach_the_page(request, project, persona, status):
    client = request.getfixturevalue(persona)
    job = PreferenceImportJob.objects.create(project=project)
    assert client.get(page_url(project)).status_code == status
    assert client.post(page_url(project), {"file": upload(GOOD)}).status_code == status
    assert client.get(f"{page_url(project)}{job.pk}/").status_code == status
    assert state() == (0, 0, 1)


def test_the_analytics_pages_and_the_preference_page_link_to_the_upload(researcher_client, project):
    url = page_url(project)
    assert (
        f'href="{url}"'
        in researcher_client.get(
            f"/projects/{project.slug}/analytics/scores/import/"
        ).content.decode()
    )
    preferences = researcher_client.get(f"/projects/{project.slug}/analytics/preferences/")
    assert f'href="{url}"' in preferences.content.decode()


# --- the API ---------------------------------------------------------------------------------

API = "/api/v1/projects"


def test_the_api_answers_202_with_the_job_then_imports_in_the_worker(
    researcher, project, import_jobs
):
    client = token_client(researcher)
    url = f"{API}/{project.slug}/preferences/import/"
    first = import_jobs.post(client, url, {"file": upload(GOOD)}, format="multipart")
    assert first.status_code == 202, first.json()
    body = first.json()
    assert body["status"] == "pending" and body["result"] is None and body["batch"] is None
    assert first["Location"] == body["url"] == f"/api/v1/preference-import-jobs/{body['id']}/"
    assert state() == (0, 0, 1)  # the request did not read the file
    import_jobs.run()
    done = client.get(body["url"]).json()
    assert done["status"] == "succeeded" and done["progress"]["phase"] == "done"
    assert done["batch"]["labels_created"] == 3 and done["batch"]["created_by"] == "rita"
    assert done["result"] == {"already_imported": False, "raters": 2, "pairs": 2}
    again = import_jobs.post(client, url, {"file": upload(GOOD)}, format="multipart")
    import_jobs.run()
    repeat = client.get(again.json()["url"]).json()
    assert repeat["result"] == {"already_imported": True}
    assert repeat["batch"]["id"] == done["batch"]["id"]
    listed = client.get(f"{API}/{project.slug}/preferences/imports/").json()
    assert [b["id"] for b in listed] == [done["batch"]["id"]]


def test_the_api_reads_the_dataset_and_format_options(researcher, project, import_jobs):
    rows = b'{"item": "i0", "model_a": "m1", "model_b": "m2", "rater": "x", "choice": "a"}\n'
    response = import_jobs.post(
        token_client(researcher),
        f"{API}/{project.slug}/preferences/import/",
        {"file": upload(rows, "labels.txt"), "dataset": "D", "format": "jsonl"},
        format="multipart",
    )
    assert response.status_code == 202, response.json()
    assert response.json()["options"] == {
        "project": project.slug,
        "dataset": "D",
        "format": "jsonl",
    }
    import_jobs.run()
    assert ImportedPreference.objects.get().choice == "a"


def test_the_api_job_lists_every_problem_and_nothing_is_written(researcher, project, import_jobs):
    client = token_client(researcher)
    response = import_jobs.post(
        client,
        f"{API}/{project.slug}/preferences/import/",
        {"file": upload(BAD)},
        format="multipart",
    )
    import_jobs.run()
    body = client.get(response.json()["url"]).json()
    assert body["status"] == "rejected" and body["problem_count"] == 5
    assert body["problems"][0] == {
        "file": "prefs.csv",
        "line": 2,
        "field": "choice",
        "code": "invalid_choice",
        "message": "choice 'maybe' is not one of a, b, tie, both_bad",
    }
    assert state()[:2] == (0, 0)


def test_the_api_keeps_projects_apart(researcher, annotator, outsider, project, import_jobs):
    url = f"{API}/{project.slug}/preferences/import/"
    created = import_jobs.post(
        token_client(researcher), url, {"file": upload(GOOD)}, format="multipart"
    )
    job_url = created.json()["url"]
    statuses = [
        token_client(user).post(url, {"file": upload(BAD)}, format="multipart").status_code
        for user in (annotator, outsider)
    ]
    assert statuses == [403, 404]
    assert [token_client(u).get(job_url).status_code for u in (annotator, outsider)] == [403, 404]
    listing = f"{API}/{project.slug}/preferences/imports/"
    assert token_client(outsider).get(listing).status_code == 404
    assert APIClient().post(url, {"file": upload(GOOD)}).status_code in (401, 403)
    assert state() == (0, 0, 1)


def test_the_api_explains_a_request_without_a_file(researcher, project):
    response = token_client(researcher).post(
        f"{API}/{project.slug}/preferences/import/", {"format": "xlsx"}, format="multipart"
    )
    assert response.status_code == 400
    assert {p["field"] for p in response.json()["problems"]} == {"file", "format"}
    assert state() == (0, 0, 0)


# --- the jobs ----------------------------------------------------------------------------------


def test_a_job_stuck_running_is_failed_by_the_health_check(project):
    from analytics.tasks import import_jobs_health_check_task

    old = timezone.now() - timedelta(seconds=settings.FLASKWEB_IMPORT_STALE_SECONDS + 60)
    stuck = PreferenceImportJob.objects.create(project=project, status="running", started_at=old)
    fresh = PreferenceImportJob.objects.create(
        project=project, status="running", started_at=timezone.now()
    )
    assert import_jobs_health_check_task() == 1
    stuck.refresh_from_db(), fresh.refresh_from_db()
    assert (stuck.status, fresh.status) == ("failed", "running")
    assert "worker lost" in stuck.error
    # a late worker cannot overwrite the failure, and a redelivered message does nothing
    assert not job_finish(PreferenceImportJob, stuck.pk, JobStatus.SUCCEEDED)
    assert preference_import_job_run(job_id=stuck.pk) is None


def test_the_preference_import_task_goes_to_the_imports_queue():
    from flaskweb.celery import app

    route = app.amqp.router.route({}, "analytics.tasks.preference_import_task")
    assert route["queue"].name == "imports"
