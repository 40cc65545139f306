"""The upload page of long-format scores (the web face of `manage.py import_scores`;
docs/IMPORT_FORMATS.md). Project researchers and admins; the import runs in the request,
all or nothing, and a rejected upload lists every problem and changes nothing."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from analytics.import_forms import ScoreImportForm
from analytics.imports import ScoreImportRejected, scores_import
from analytics.selectors import score_import_list
from judging.access import project_get_for_staff

#: Problems listed on the page (all are counted).
MAX_PROBLEMS_SHOWN = 500


@require_http_methods(["GET", "POST"])
@login_required
def score_import(request, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    form = ScoreImportForm(request.POST or None, request.FILES or None)
    problems: list = []
    problem_count = 0
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            result = scores_import(
                project_slug=project.slug,
                files=[(f.name, f) for f in data["files"]],
                dataset_name=data["dataset"],
                scales=form.scale_specs(),
                judge_scale_raw=data["judge_scale"] == "raw",
                created_by=request.user,
            )
        except ScoreImportRejected as exc:
            problems, problem_count = exc.problems[:MAX_PROBLEMS_SHOWN], len(exc.problems)
            form.add_error(None, str(exc))
        else:
            batch = result.batch
            if result.already_imported:
                messages.info(
                    request,
                    f"These files were imported before (score import {batch.pk}); "
                    "nothing was written.",
                )
            else:
                messages.success(
                    request,
                    f"Score import {batch.pk}: {batch.scores_created} new scores, "
                    f"{batch.scores_unchanged} already stored, {batch.items_created} new items, "
                    f"{batch.responses_created} new responses.",
                )
            return redirect("analytics:score-import", slug=project.slug)
    context = {
        "project": project,
        "form": form,
        "problems": problems,
        "problem_count": problem_count,
        "imports": score_import_list(project=project),
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "analytics/score_import.html", context, status=status)
