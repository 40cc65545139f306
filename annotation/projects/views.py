"""The app's hub pages: the user's projects and a project's page (its datasets, latest
uploads and campaigns, each linking into its feature)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation import access, selectors
from annotation.campaigns.selectors import campaign_list_for_project
from annotation.datasets.selectors import upload_list_for_project
from annotation.review.selectors import project_slugs_to_review
from flaskweb.htmx import HtmxHttpRequest


@require_GET
@login_required
def home(request: HtmxHttpRequest) -> HttpResponse:
    projects = selectors.project_list_for_user(user=request.user)
    context = {"projects": projects, "to_review": project_slugs_to_review(user=request.user)}
    return render(request, "annotation/home.html", context)


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
