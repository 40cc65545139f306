"""The app's hub pages: the user's projects, a new project (site admins) and a project's
page (its datasets, latest uploads and campaigns, each linking into its feature; the first
steps while it has no dataset)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from annotation import access, selectors
from annotation.campaigns.selectors import campaign_list_for_project
from annotation.datasets.selectors import upload_list_for_project
from annotation.projects.forms import ProjectCreateForm, slug_hint
from annotation.review.selectors import project_slugs_to_review
from annotation.services.projects import project_create as project_create_service
from flaskweb.htmx import HtmxHttpRequest

CREATE_PAGE = "annotation/project_create.html"


@require_GET
@login_required
def home(request: HtmxHttpRequest) -> HttpResponse:
    projects = selectors.project_list_for_user(user=request.user)
    context = {
        "projects": projects,
        "to_review": project_slugs_to_review(user=request.user),
        "can_create": access.is_site_admin(request.user),
    }
    return render(request, "annotation/home.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def project_create(request: HtmxHttpRequest) -> HttpResponse:
    """Site admins only (403 for everyone else: there is no project to hide). An htmx GET
    is the form asking for the slug hint of what has been typed so far."""
    if not access.is_site_admin(request.user):
        raise PermissionDenied("only site admins create projects")
    if request.htmx and request.method == "GET":
        hint = slug_hint(name=request.GET.get("name", ""), slug=request.GET.get("slug", ""))
        return render(request, f"{CREATE_PAGE}#slug-hint", {"hint": hint})
    form = ProjectCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            project = project_create_service(**form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Project {project.name} created.")
            url = reverse("annotation:project-detail", args=[project.slug])
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    hint = slug_hint(name=form["name"].value() or "", slug=form["slug"].value() or "")
    return render(request, CREATE_PAGE, {"form": form, "hint": hint})


@require_GET
@login_required
def project_detail(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project, role = access.project_get_for_user(request.user, slug)
    context = {
        "project": project,
        "role": role,
        "datasets": selectors.dataset_list_for_project(project=project),
        "uploads": upload_list_for_project(project=project)[:10],
        "campaigns": campaign_list_for_project(project=project),
    }
    return render(request, "annotation/project.html", context)
