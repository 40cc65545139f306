"""The upload pages of long-format scores and of preference labels (the web faces of
`manage.py import_scores` and `manage.py import_preferences`; docs/IMPORT_FORMATS.md).
Project researchers and admins. The request stores the files and redirects to the job's
progress page; a worker runs the import (all or nothing), and the page lists every problem
of a rejected upload, which changed nothing."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from analytics.imports.forms import PreferenceImportForm, ScoreImportForm
from analytics.imports.jobs import (
    import_job_progress,
    preference_import_job_create,
    score_import_job_create,
)
from analytics.imports.selectors import (
    preference_import_job_list,
    preference_import_list,
    score_import_job_list,
    score_import_list,
)
from analytics.models import PreferenceImportJob, ScoreImportJob
from annotation.access import project_get_for_staff
from annotation.models import Project
from flaskweb.htmx import template_for
from flaskweb.jobs import ImportJob

#: Problems listed on the page (all are counted; the job keeps the first 1,000).
MAX_PROBLEMS_SHOWN = 500
JOB_PAGE = "analytics/import_job.html"


@require_http_methods(["GET", "POST"])
@login_required
def score_import(request, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    form = ScoreImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        job = score_import_job_create(
            project=project,
            project_slug=project.slug,
            files=data["files"],
            dataset_name=data["dataset"],
            scales=form.scale_specs(),
            judge_scale_raw=data["judge_scale"] == "raw",
            created_by=request.user,
        )
        return redirect("analytics:score-import-job", slug=project.slug, pk=job.pk)
    context = {
        "project": project,
        "form": form,
        "imports": score_import_list(project=project),
        "jobs": score_import_job_list(project=project),
        "job_url": "analytics:score-import-job",
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "analytics/score_import.html", context, status=status)


@require_http_methods(["GET", "POST"])
@login_required
def preference_import(request, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    form = PreferenceImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        job = preference_import_job_create(
            project=project,
            file=data["file"],
            dataset_name=data["dataset"],
            fmt=data["format"],
            created_by=request.user,
        )
        return redirect("analytics:preference-import-job", slug=project.slug, pk=job.pk)
    context = {
        "project": project,
        "form": form,
        "imports": preference_import_list(project=project),
        "jobs": preference_import_job_list(project=project),
        "job_url": "analytics:preference-import-job",
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "analytics/preference_import.html", context, status=status)


def _job_page(request, project: Project, job: ImportJob | None, kind: str) -> HttpResponse:
    """The progress page of an import job of the project (polled by htmx until it ends)."""
    if job is None or job.project_id != project.pk:  # type: ignore[attr-defined]
        raise Http404("no such import")
    context = {
        "project": project,
        "job": job,
        "kind": kind,
        "progress": import_job_progress(job),
        "problems": job.problems[:MAX_PROBLEMS_SHOWN],
    }
    response = render(request, template_for(request, JOB_PAGE, "job-status"), context)
    if request.htmx and job.is_finished:
        # 286 tells htmx to stop polling; the final state is swapped in with it.
        return HttpResponseStopPolling(response.content)
    return response


@require_GET
@login_required
def score_import_job(request, slug: str, pk: int) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)  # who may look, before what exists
    job = ScoreImportJob.objects.select_related("batch__dataset").filter(pk=pk).first()
    return _job_page(request, project, job, "score")


@require_GET
@login_required
def preference_import_job(request, slug: str, pk: int) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    job = PreferenceImportJob.objects.select_related("batch").filter(pk=pk).first()
    return _job_page(request, project, job, "preference")
