"""The members page of a project: its staff see who holds which role; project admins (and
site admins) add users, change roles and remove members, through the same services as the
API (annotation/services/projects.py). Annotators get 403, non-members 404.

The accounts study links made (annotation/study/) are not listed one by one: each study is
one line (its campaign, links and participant count), and `?study=<campaign id>` lists
that study's participants, a page at a time."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST

from annotation import access
from annotation import selectors as shared
from annotation.members import selectors
from annotation.members.forms import MemberAddForm, MemberChangeForm
from annotation.models import Project, ProjectRole
from annotation.services import projects as services
from flaskweb.htmx import HtmxHttpRequest

PAGE = "annotation/members.html"


def _render(request: HtmxHttpRequest, project: Project, role: str, **extra) -> HttpResponse:
    # the study list a POST came from stays on screen (its forms carry study and page)
    asked = request.GET if request.method == "GET" else request.POST
    study_id = shared.study_id_from(asked.get("study"))
    study = shared.study_get_for_project(project=project, study_id=study_id) if study_id else None
    context = {
        "project": project,
        "role": role,
        "can_manage": role == ProjectRole.ADMIN,
        "study_asked": bool(asked.get("study")),
        "study": study,
        "roles": ProjectRole.choices,
        "add_form": MemberAddForm(),
        **extra,
    }
    if study is not None:
        members = selectors.member_list_for_project(project=project, study_id=study.pk)
        page = Paginator(members, selectors.STUDY_PAGE_SIZE).get_page(asked.get("page"))
        context.update(members=page.object_list, page=page)
    elif context["study_asked"]:
        context["members"] = []  # an unknown study lists nobody, and the page says so
    else:
        context.update(
            members=selectors.member_list_for_project(
                project=project, participants=shared.PARTICIPANTS_EXCLUDE
            ),
            studies=shared.study_group_list(project=project),
            changes=selectors.membership_change_list(project=project, study_arrivals=False),
        )
    template = f"{PAGE}#members" if request.htmx else PAGE
    return render(request, template, context)


def _back(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """Back to the members page after a POST: to the study list it came from, if any."""
    url = reverse("annotation:member-list", args=[project.slug])
    study_id = shared.study_id_from(request.POST.get("study"))
    if study_id is not None:
        url += "?" + urlencode({"study": study_id, "page": request.POST.get("page") or 1})
    return redirect(url)


def _done(request: HtmxHttpRequest, project: Project, role: str, message: str) -> HttpResponse:
    if request.htmx:
        return _render(request, project, role, notice=message)
    messages.success(request, message)
    return _back(request, project)


@require_http_methods(["GET", "POST"])
@login_required
def member_list(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    if request.method == "GET":
        project, role = access.project_get_for_user(request.user, slug)
        return _render(request, project, role)
    project = access.project_get_for_admin(request.user, slug)
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            membership = services.membership_add_by_username(
                project=project,
                username=form.cleaned_data["username"],
                role=form.cleaned_data["role"],
                actor=request.user,
            )
        except ValidationError as exc:
            form.add_error(None, exc.messages)
        else:
            name = membership.user.username
            return _done(request, project, ProjectRole.ADMIN, f"{name} added as {membership.role}.")
    return _render(request, project, ProjectRole.ADMIN, add_form=form)


@require_POST
@login_required
def member_update(request: HtmxHttpRequest, slug: str, username: str) -> HttpResponse:
    project = access.project_get_for_admin(request.user, slug)
    membership = selectors.membership_get(project=project, username=username)
    if membership is None:
        raise Http404("no member of this project has that username")
    form = MemberChangeForm(request.POST)
    error = ""
    if not form.is_valid():
        # an ErrorList iterates over its messages (it unwraps each ValidationError)
        error = (
            " ".join(cast("Iterable[str]", form.non_field_errors())) or "choose one of the roles"
        )
    else:
        try:
            if form.cleaned_data["remove"]:
                services.membership_remove(membership=membership, actor=request.user)
                message = f"{username} removed from the project."
            else:
                membership = services.membership_update(
                    membership=membership, role=form.cleaned_data["role"], actor=request.user
                )
                message = f"{username} is now {membership.role}."
        except ValidationError as exc:
            error = " ".join(exc.messages)
        else:
            return _done(request, project, ProjectRole.ADMIN, message)
    if request.htmx:
        return _render(request, project, ProjectRole.ADMIN, error=f"{username}: {error}")
    messages.error(request, f"{username}: {error}")
    return _back(request, project)
