"""Dataset pages: a dataset with its composition and filtered items, an item with its
rubric and every response, and the upload (import) form and its progress page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from annotation import access, selectors
from annotation.datasets.forms import DatasetUploadForm
from annotation.datasets.selectors import (
    dataset_stats,
    item_filters_resolve,
    item_list_for_dataset,
)
from annotation.datasets.services import (
    FileSpec,
    ImportOptionsError,
    dataset_upload_create,
    upload_progress_get,
)
from annotation.models import Difficulty, UploadSource
from flaskweb.htmx import HtmxHttpRequest, template_for


@require_GET
@login_required
def dataset_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    dataset, role = access.dataset_get_for_user(request.user, pk)
    filters = item_filters_resolve(
        project=dataset.project,
        skill=request.GET.get("skill"),
        domain=request.GET.get("domain"),
        difficulty=request.GET.get("difficulty"),
        search=request.GET.get("q", ""),
    )
    # a filter that names nothing lists nothing: the page says which value is unknown
    # instead of quietly showing every item
    items = item_list_for_dataset(dataset=dataset, **filters.narrowing())
    if filters.errors:
        items = items.none()
    page = Paginator(items, 50).get_page(request.GET.get("page"))
    context = {
        "dataset": dataset,
        "project": dataset.project,
        "page": page,
        "filters": filters,
        "skills": selectors.skill_list_for_project(project=dataset.project),
        "domains": selectors.domain_list_for_project(project=dataset.project),
        "difficulties": Difficulty.choices,
    }
    if not request.htmx:
        context["stats"] = dataset_stats(dataset=dataset)
    return render(request, template_for(request, "annotation/dataset.html", "item-list"), context)


@require_GET
@login_required
def item_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    item = access.item_get_for_user(request.user, pk)
    rubrics = selectors.rubrics_current_for_project(project=item.dataset.project)
    skills = [(s, rubrics.get(s.skill_id)) for s in item.item_skills.all()]
    context = {"item": item, "project": item.dataset.project, "skills": skills}
    return render(request, "annotation/item.html", context)


# --- uploads ----------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def upload_create(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project, _ = access.project_get_for_user(request.user, slug)
    form = DatasetUploadForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        files = data["files"]
        model = data["model_name"] if len(files) == 1 else ""
        try:
            upload = dataset_upload_create(
                project=project,
                dataset_name=data["dataset"],
                source=UploadSource.WEB,
                files=[(FileSpec(f.name, data["format"], model), f) for f in files],
                policies=form.policies(),
                created_by=request.user,
            )
        except (ImportOptionsError, ValidationError) as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("annotation:upload-detail", pk=upload.pk)
    return render(request, "annotation/upload_form.html", {"project": project, "form": form})


@require_GET
@login_required
def upload_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    upload = access.upload_get_for_staff(request.user, pk)
    context = {
        "upload": upload,
        "project": upload.project,
        "progress": {"phase": "", "done": 0, "total": 1, **upload_progress_get(upload.pk)},
        "problems": upload.problems.all()[:500],
        "files": upload.files.all(),
    }
    response = render(
        request, template_for(request, "annotation/upload.html", "upload-status"), context
    )
    if request.htmx and upload.is_finished:
        # 286 tells htmx to stop polling; the final state is swapped in with it.
        stop = HttpResponseStopPolling(response.content)
        return stop
    return response
