"""The upload page of long-format scores (the web face of `manage.py import_scores`;
docs/IMPORT_FORMATS.md). Project researchers and admins. The request stores the files and
redirects to the job's progress page; a worker runs the import (all or nothing), and the
page lists every problem of a rejected upload, which changed nothing."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from analytics.imports.forms import ScoreImportForm
from analytics.imports.jobs import score_import_job_create, score_import_progress_get
from analytics.imports.selectors import score_import_job_list, score_import_list
from analytics.models import ScoreImportJob
from annotation.access import project_get_for_staff
from flaskweb.htmx import template_for

#: Problems listed on the page (all are counted; the job keeps the first 1,000).
MAX_PROBLEMS_SHOWN = 500


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
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "analytics/score_import.html", context, status=status)


@require_GET
@login_required
def score_import_job(request, slug: str, pk: int) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    job = get_object_or_404(ScoreImportJob.objects.select_related("batch__dataset"), pk=pk)
    if job.project_id != project.pk:
        raise Http404("no such import")
    context = {
        "project": project,
        "job": job,
        "progress": {"phase": "", "done": 0, "total": 1, **score_import_progress_get(job.pk)},
        "problems": job.problems[:MAX_PROBLEMS_SHOWN],
    }
    response = render(
        request, template_for(request, "analytics/score_import_job.html", "job-status"), context
    )
    if request.htmx and job.is_finished:
        # 286 tells htmx to stop polling; the final state is swapped in with it.
        return HttpResponseStopPolling(response.content)
    return response
