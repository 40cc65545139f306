"""Catalogue pages: the skills, domains and difficulty levels with the rubric in force,
rubric edits (a new version), custom skills and FLASK skill-set file imports."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotation import access, selectors
from annotation.catalogue.forms import RubricForm, RubricImportForm, SkillCreateForm
from annotation.catalogue.selectors import rubric_current, rubric_versions
from annotation.catalogue.services import (
    RubricFileError,
    rubric_import_flask,
    rubric_revise,
    skill_create,
)
from annotation.models import Ability, Difficulty, Project, Skill
from flaskweb.htmx import HtmxHttpRequest


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
    if skill.project is not None and access.project_role(request.user, skill.project) is None:
        # another project's skill: its id must not tell that it exists (404, not 403)
        raise Http404("no such skill")
    if not can_edit or (skill.project_id and skill.project_id != getattr(project, "pk", None)):
        return HttpResponse("You may not edit this rubric.", status=403)
    current = rubric_current(skill=skill, project=project)
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
                messages.success(request, f"{skill.name}: {rubric.label} is now in force.")
                return redirect(_catalogue_url(project))
    else:
        initial = {"criterion": current.criterion} if current else {}
        if current:
            initial.update({f"anchor_{n}": a for n, a in enumerate(current.anchors, start=1)})
        form = RubricForm(initial=initial)
    versions = rubric_versions(skill=skill, project=project)
    context = {"skill": skill, "project": project, "form": form, "versions": versions}
    return render(request, "annotation/rubric_edit.html", context)


def _catalogue_url(project: Project | None) -> str:
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
