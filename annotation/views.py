"""HTML pages of the annotation app: projects, datasets, items, catalogue, uploads."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from annotation import access, selectors
from annotation.campaign_selectors import campaign_list_for_project
from annotation.forms import DatasetUploadForm, RubricForm, RubricImportForm, SkillCreateForm
from annotation.models import Ability, Difficulty, Project, Skill, UploadSource
from annotation.services.catalogue import (
    RubricFileError,
    rubric_import_flask,
    rubric_revise,
    skill_create,
)
from annotation.services.imports import (
    FileSpec,
    ImportOptionsError,
    dataset_upload_create,
    upload_progress_get,
)
from flaskweb.htmx import HtmxHttpRequest, template_for


@require_GET
@login_required
def home(request: HtmxHttpRequest) -> HttpResponse:
    projects = selectors.project_list_for_user(user=request.user)
    return render(request, "annotation/home.html", {"projects": projects})


@require_GET
@login_required
def project_detail(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project, role = access.project_get_for_user(request.user, slug)
    context = {
        "project": project,
        "role": role,
        "datasets": selectors.dataset_list_for_project(project=project),
        "uploads": selectors.upload_list_for_project(project=project)[:10],
        "campaigns": campaign_list_for_project(project=project),
    }
    return render(request, "annotation/project.html", context)


def _int_param(request, name: str) -> int | None:
    try:
        return int(request.GET.get(name, ""))
    except ValueError:
        return None


@require_GET
@login_required
def dataset_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    dataset, role = access.dataset_get_for_user(request.user, pk)
    filters = {
        "skill_id": _int_param(request, "skill"),
        "domain_id": _int_param(request, "domain"),
        "difficulty": _int_param(request, "difficulty"),
        "search": request.GET.get("q", "").strip()[:200],
    }
    items = selectors.item_list_for_dataset(dataset=dataset, **filters)
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
        context["stats"] = selectors.dataset_stats(dataset=dataset)
    return render(request, template_for(request, "annotation/dataset.html", "item-list"), context)


@require_GET
@login_required
def item_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    item = access.item_get_for_user(request.user, pk)
    rubrics = selectors.rubrics_current_for_project(project=item.dataset.project)
    skills = [(s, rubrics.get(s.skill_id)) for s in item.item_skills.all()]
    context = {"item": item, "project": item.dataset.project, "skills": skills}
    return render(request, "annotation/item.html", context)


# --- catalogue --------------------------------------------------------------------------------


def _catalogue_project(request) -> tuple[Project | None, bool]:
    """The project whose catalogue view is asked for (?project=slug), and whether the user
    may edit it. Built-in wording is edited by site admins only."""
    slug = request.GET.get("project") or request.POST.get("project")
    if not slug:
        return None, request.user.is_superuser
    project, role = access.project_get_for_user(request.user, slug)
    return project, role in access.STAFF_ROLES


@require_GET
@login_required
def catalogue(request: HtmxHttpRequest) -> HttpResponse:
    project, can_edit = _catalogue_project(request)
    rubrics = selectors.rubrics_current_for_project(project=project)
    skills = list(selectors.skill_list_for_project(project=project))
    abilities = []
    for key, label in Ability.choices:
        rows = [(s, rubrics.get(s.pk)) for s in skills if s.ability == key]
        if rows:
            abilities.append((label, rows))
    context = {
        "project": project,
        "can_edit": can_edit,
        "abilities": abilities,
        "domains": selectors.domain_list_for_project(project=project),
        "difficulties": Difficulty.choices,
    }
    return render(request, "annotation/catalogue.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def rubric_edit(request: HtmxHttpRequest, skill_id: int) -> HttpResponse:
    project, can_edit = _catalogue_project(request)
    skill = get_object_or_404(Skill.objects.select_related("project"), pk=skill_id)
    if skill.project_id and access.project_role(request.user, skill.project) is None:
        # another project's skill: its id must not tell that it exists (404, not 403)
        raise Http404("no such skill")
    if not can_edit or (skill.project_id and skill.project_id != getattr(project, "pk", None)):
        return HttpResponse("You may not edit this rubric.", status=403)
    current = selectors.rubric_current(skill=skill, project=project)
    if request.method == "POST":
        form = RubricForm(request.POST)
        if form.is_valid():
            try:
                rubric = rubric_revise(
                    skill=skill,
                    project=project,
                    criterion=form.cleaned_data["criterion"],
                    anchors=form.anchors(),
                    note=form.cleaned_data["note"],
                    created_by=request.user,
                )
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                messages.success(
                    request, f"{skill.name}: version {rubric.version} is now in force."
                )
                return redirect(_catalogue_url(project))
    else:
        initial = {"criterion": current.criterion} if current else {}
        if current:
            initial.update({f"anchor_{n}": a for n, a in enumerate(current.anchors, start=1)})
        form = RubricForm(initial=initial)
    versions = selectors.rubric_versions(skill=skill, project=project)
    context = {"skill": skill, "project": project, "form": form, "versions": versions}
    return render(request, "annotation/rubric_edit.html", context)


def _catalogue_url(project: Project | None) -> str:
    from django.urls import reverse

    url = reverse("annotation:catalogue")
    return f"{url}?project={project.slug}" if project else url


@require_http_methods(["GET", "POST"])
@login_required
def skill_add(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project, _ = access.project_get_for_user(request.user, slug)
    form = SkillCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            skill = skill_create(
                project=project,
                name=form.cleaned_data["name"],
                criterion=form.cleaned_data["criterion"],
                anchors=form.anchors(),
                ability=form.cleaned_data["ability"],
                created_by=request.user,
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Skill {skill.name} added to {project.name}.")
            return redirect(_catalogue_url(project))
    return render(request, "annotation/skill_add.html", {"project": project, "form": form})


@require_http_methods(["GET", "POST"])
@login_required
def rubric_import(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project, _ = access.project_get_for_user(request.user, slug)
    form = RubricImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            result = rubric_import_flask(
                project=project, data=form.cleaned_data["file"].read(), created_by=request.user
            )
        except (RubricFileError, ValidationError) as exc:
            form.add_error("file", str(exc))
        else:
            messages.success(
                request,
                f"Rubric file imported: {len(result.created_skills)} new skills, "
                f"{len(result.new_versions)} new versions, {len(result.unchanged)} unchanged.",
            )
            return redirect(_catalogue_url(project))
    return render(request, "annotation/rubric_import.html", {"project": project, "form": form})


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
