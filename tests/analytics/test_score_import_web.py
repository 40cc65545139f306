"""The web faces of the long-format score import: the upload page and the REST API, which
store the files and hand them to a background job. The importer's rules themselves are
tested in test_score_import.py; here: the request reads nothing, the job imports, access,
the request shapes, problems that are all listed and change nothing, and repeats."""

from __future__ import annotations

import io
import tracemalloc
from datetime import timedelta

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from rest_framework.test import APIClient

from analytics.imports.jobs import score_import_job_run
from analytics.imports.services import scores_import
from analytics.models import ImportedScore, ScoreImport, ScoreImportJob
from annotation.models import Dataset, Item, Project, Response
from annotation.services.projects import project_create
from flaskweb.jobs import JobStatus, job_finish
from tests.clients import token_client
from tests.jobs import import_jobs_fixture  # noqa: F401 - the import_jobs fixture

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


def test_the_request_stores_the_files_and_the_worker_imports_them(
    researcher_client, project, import_jobs
):
    # the request only stores the upload: the job is pending and nothing is written
    before = state()
    response = import_jobs.post(researcher_client, page_url(project), {"files": [upload(GOOD)]})
    job = ScoreImportJob.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"{page_url(project)}{job.pk}/"
    assert job.status == JobStatus.PENDING and job.files[0]["name"] == "scores.csv"
    assert state() == before and import_jobs.queued == [("score", job.pk)]
    polling = researcher_client.get(response["Location"])
    assert 'hx-trigger="every 1s"' in polling.content.decode()
    # the worker's task runs it
    assert import_jobs.run() == [job.pk]
    job.refresh_from_db()
    batch = ScoreImport.objects.get()
    assert job.status == JobStatus.SUCCEEDED and job.batch == batch
    assert batch.scores_created == 4 and batch.created_by.username == "rita"
    panel = researcher_client.get(response["Location"], headers={"HX-Request": "true"})
    assert panel.status_code == 286  # htmx stops polling
    assert f"Score import {batch.pk}: <b>4</b> new scores" in panel.content.decode()
    listing = researcher_client.get(page_url(project)).content.decode()
    assert 'id="score-imports"' in listing and "scores.csv (4 rows)" in listing


def test_the_page_lists_every_problem_and_writes_nothing(researcher_client, project, import_jobs):
    before = state()
    response = import_jobs.post(researcher_client, page_url(project), {"files": [upload(BAD)]})
    assert response.status_code == 302
    import_jobs.run()
    assert state() == before
    job = ScoreImportJob.objects.get()
    assert job.status == JobStatus.REJECTED and job.problem_count == 2
    html = researcher_client.get(response["Location"]).content.decode()
    assert "2 problems" in html and 'id="import-problems"' in html
    assert "rater_kind" in html  # the field of the second row's problem
    assert "nothing was written" in html


def test_the_page_applies_declared_scales(researcher_client, project, import_jobs):
    data = b"item,system,rater,rater_kind,skill,score\nq1,m,ann1,human,Fluency,0.25\n"
    response = import_jobs.post(
        researcher_client,
        page_url(project),
        {"files": [upload(data)], "scales": "Fluency=0:1:continuous\n"},
    )
    assert response.status_code == 302
    import_jobs.run()
    assert ImportedScore.objects.get().value == 0.25


def test_the_same_file_twice_writes_nothing_the_second_time(
    researcher_client, project, import_jobs
):
    import_jobs.post(researcher_client, page_url(project), {"files": [upload(GOOD)]})
    import_jobs.run()
    before = state()
    response = import_jobs.post(researcher_client, page_url(project), {"files": [upload(GOOD)]})
    import_jobs.run()
    assert state() == before
    assert "were imported before" in researcher_client.get(response["Location"]).content.decode()


def test_the_page_escapes_what_the_file_says(researcher_client, project, import_jobs):
    evil = b'item,system,rater,rater_kind,skill,score\n"<script>x()</script>",m,a,human,R,9\n'
    response = import_jobs.post(
        researcher_client, page_url(project), {"files": [upload(evil, "<b>.csv")]}
    )
    import_jobs.run()
    html = researcher_client.get(response["Location"]).content.decode()
    assert "<script>x()</script>" not in html and "<b>.csv" not in html
    assert "&lt;b&gt;.csv" in html


def test_a_job_page_of_another_project_is_not_found(researcher_client, project, import_jobs):
    other = project_create(slug="elsewhere")
    job = ScoreImportJob.objects.create(project=other, options={"dataset": "x"})
    assert researcher_client.get(f"{page_url(project)}{job.pk}/").status_code == 404


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


def test_the_api_answers_202_with_the_job_then_imports_in_the_worker(
    researcher, project, import_jobs
):
    client = api_client(researcher)
    url = f"{API}/{project.slug}/scores/import/"
    before = state()
    first = import_jobs.post(
        client, url, {"files": [upload(GOOD)], "dataset": "Crowd"}, format="multipart"
    )
    assert first.status_code == 202, first.json()
    body = first.json()
    assert body["status"] == "pending" and body["result"] is None and body["batch"] is None
    assert first["Location"] == body["url"] == f"/api/v1/score-import-jobs/{body['id']}/"
    assert state() == before  # the request did not read the file
    import_jobs.run()
    done = client.get(body["url"]).json()
    assert done["status"] == "succeeded" and done["progress"]["phase"] == "done"
    assert done["batch"]["scores_created"] == 4 and done["batch"]["dataset"] == "Crowd"
    assert done["result"] == {
        "already_imported": False,
        "project_created": False,
        "dataset_created": True,
        "skills_created": [],
    }
    again = import_jobs.post(
        client, url, {"files": [upload(GOOD)], "dataset": "Crowd"}, format="multipart"
    )
    import_jobs.run()
    repeat = client.get(again.json()["url"]).json()
    assert repeat["result"]["already_imported"] is True
    assert repeat["batch"]["id"] == done["batch"]["id"]
    listed = client.get(f"{API}/{project.slug}/scores/imports/").json()
    assert [b["id"] for b in listed] == [done["batch"]["id"]]


def test_the_api_job_lists_every_problem_and_nothing_is_written(researcher, project, import_jobs):
    before = state()
    client = api_client(researcher)
    response = import_jobs.post(
        client,
        f"{API}/{project.slug}/scores/import/",
        {"files": [upload(BAD)]},
        format="multipart",
    )
    assert response.status_code == 202
    import_jobs.run()
    body = client.get(response.json()["url"]).json()
    assert body["status"] == "rejected" and body["problem_count"] == 2
    assert {(p["line"], p["field"]) for p in body["problems"]} >= {(3, "rater_kind")}
    assert state() == before
    assert not list((settings.MEDIA_ROOT / "score-imports").rglob("*.csv"))  # files deleted


def test_the_api_reads_repeated_scale_options(researcher, project, import_jobs):
    data = (
        b"item,system,rater,rater_kind,skill,score\n"
        b"q1,m,ann1,human,Fluency,0.5\nq1,m,bleu,judge,Fluency,37.5\n"
    )
    response = import_jobs.post(
        api_client(researcher),
        f"{API}/{project.slug}/scores/import/",
        {"files": [upload(data)], "scale": ["Fluency=0:1:continuous"], "judge_scale": "raw"},
        format="multipart",
    )
    assert response.status_code == 202, response.json()
    import_jobs.run()
    assert sorted(ImportedScore.objects.values_list("value", flat=True)) == [0.5, 37.5]


def test_the_job_of_another_project_is_not_found(researcher, outsider, project, import_jobs):
    response = import_jobs.post(
        api_client(researcher),
        f"{API}/{project.slug}/scores/import/",
        {"files": [upload(GOOD)]},
        format="multipart",
    )
    assert api_client(outsider).get(response.json()["url"]).status_code == 404


def test_the_api_explains_a_request_without_files(researcher, project):
    response = api_client(researcher).post(
        f"{API}/{project.slug}/scores/import/", {"judge_scale": "maybe"}, format="multipart"
    )
    assert response.status_code == 400
    fields = {p["field"] for p in response.json()["problems"]}
    assert fields == {"files", "judge_scale"}


def test_only_site_admins_create_projects_through_the_api(researcher, admin_user, import_jobs):
    url = f"{API}/new-study/scores/import/"

    def body():
        return {"files": [upload(GOOD)], "create_project": "true"}

    assert api_client(researcher).post(url, body(), format="multipart").status_code == 404
    assert not Project.objects.filter(slug="new-study").exists()
    admin = api_client(admin_user)
    created = import_jobs.post(admin, url, body(), format="multipart")
    assert created.status_code == 202 and created.json()["project"] == "new-study"
    import_jobs.run()
    assert admin.get(created.json()["url"]).json()["result"]["project_created"] is True
    assert ImportedScore.objects.filter(project__slug="new-study").count() == 4
    assert ScoreImportJob.objects.get().project.slug == "new-study"


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


# --- the jobs ----------------------------------------------------------------------------------


def test_a_job_stuck_running_is_failed_by_the_health_check(researcher, project):
    from analytics.tasks import import_jobs_health_check_task
    from judging.models import JudgeOutputImportJob
    from judging.tasks import judge_output_import_jobs_health_check_task

    old = timezone.now() - timedelta(seconds=settings.FLASKWEB_IMPORT_STALE_SECONDS + 60)
    stuck = ScoreImportJob.objects.create(project=project, status="running", started_at=old)
    fresh = ScoreImportJob.objects.create(
        project=project, status="running", started_at=timezone.now()
    )
    dataset = Dataset.objects.create(project=project, name="Judged")
    judged = JudgeOutputImportJob.objects.create(
        project=project, dataset=dataset, status="running", started_at=old
    )
    assert import_jobs_health_check_task() == 1
    assert judge_output_import_jobs_health_check_task() == 1
    stuck.refresh_from_db(), fresh.refresh_from_db(), judged.refresh_from_db()
    assert (stuck.status, fresh.status, judged.status) == ("failed", "running", "failed")
    assert "worker lost" in stuck.error
    # a late worker cannot overwrite the failure, and a redelivered message does nothing
    assert not job_finish(ScoreImportJob, stuck.pk, JobStatus.SUCCEEDED)
    assert score_import_job_run(job_id=stuck.pk) is None


def test_the_import_tasks_go_to_the_imports_queue():
    from flaskweb.celery import app

    router = app.amqp.router
    for name in ("analytics.tasks.score_import_task", "judging.tasks.judge_output_import_task"):
        assert router.route({}, name)["queue"].name == "imports", name
    assert router.route({}, "judging.tasks.judge_response_task")["queue"].name == "judging"


def _scores_csv(items: int) -> bytes:
    rows = ["item,system,rater,rater_kind,skill,score,rationale"]
    for i in range(items):
        for system in ("model-a", "model-b"):
            for rater in ("ann1", "ann2", "ann3", "judge-x"):
                kind = "judge" if rater.startswith("judge") else "human"
                rows.append(f"q{i},{system},{rater},{kind},Readability,{1 + i % 5},fine {i}")
    return ("\n".join(rows) + "\n").encode()


@pytest.mark.slow
def test_the_score_import_holds_no_row_in_memory(project):
    # the Python heap at the peak of an import of 4x the rows is about the same: rows are
    # staged in batches and checked in the database (before: every row, item and text was
    # held, and the peak grew with the file)
    peaks = []
    for n, items in enumerate((1_000, 4_000)):
        data = io.BytesIO(_scores_csv(items))
        tracemalloc.start()
        scores_import(
            project_slug=project.slug, files=[("s.csv", data)], dataset_name=f"Memory {n}"
        )
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert ImportedScore.objects.count() == 8 * 5_000
    assert peaks[1] < 1.5 * peaks[0] + 2_000_000, peaks
