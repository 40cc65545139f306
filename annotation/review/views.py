"""Review pages (docs/REVIEW.md): a project's campaigns to review, a campaign's review queue,
the adjudication page of one response, the review settings and the campaign page's summary.

Reviewers, researchers and admins of the project review (annotation.access.REVIEW_ROLES):
404 for non-members, 403 for annotators. The settings are the staff's (reviewers 403).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from annotation import access
from annotation.models import Campaign, ProjectRole, Response
from annotation.review import selectors as rs
from annotation.review import services
from annotation.review.forms import AdjudicationForm, ReviewSettingsForm
from annotation.selectors import skills_for_response
from flaskweb.htmx import HtmxHttpRequest, template_for

QUEUE = "annotation/review/queue.html"
ADJUDICATE = "annotation/review/adjudicate.html"
SETTINGS = "annotation/review/settings.html"
PROJECT = "annotation/review/project.html"
SUMMARY = "annotation/review/summary.html"
PAGE_SIZE = 50


def _queue_url(campaign: Campaign) -> str:
    return reverse("annotation:review-queue", args=[campaign.pk])


def _response_url(campaign: Campaign, response_id: int) -> str:
    return reverse("annotation:review-response", args=[campaign.pk, response_id])


@require_GET
@login_required
def review_project(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project, role = access.project_get_for_user(request.user, slug, roles=access.REVIEW_ROLES)
    context = {
        "project": project,
        "role": role,
        "campaigns": rs.review_campaign_list(project=project),
    }
    return render(request, PROJECT, context)


@require_GET
@login_required
def review_queue(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign, role = access.campaign_get_for_reviewer(request.user, pk)
    queue = rs.review_queue(campaign=campaign)
    page = Paginator(queue, PAGE_SIZE).get_page(request.GET.get("page"))
    rs.queue_entries_describe(page.object_list)
    context = {
        "campaign": campaign,
        "project": campaign.project,
        "role": role,
        "is_staff": role in access.STAFF_ROLES,
        "page": page,
        "pending": sum(1 for e in queue if e.pending),
        "total": len(queue),
        "next_id": rs.queue_next(campaign=campaign, queue=queue),
        "adaptive": rs.adaptive_summary(campaign=campaign),
    }
    # htmx (the pager) swaps the table only
    return render(request, template_for(request, QUEUE, "queue-table"), context)


def _response_or_404(campaign: Campaign, response_id: int) -> Response:
    response = rs.response_for_review(campaign=campaign, response_id=response_id)
    if response is None:
        raise Http404("no such response in this campaign")
    return response


def _adjudicate_context(
    campaign: Campaign, role: str, response_id: int, queue: list | None = None, **extra
) -> dict:
    """The adjudication page's context; `queue`: the campaign's queue when the caller has
    read it (it is the page's largest read: read once per request)."""
    response = _response_or_404(campaign, response_id)
    queue = rs.review_queue(campaign=campaign) if queue is None else queue
    entry = next((e for e in queue if e.response_id == response_id), None)
    flagged = {r.skill_id for r in entry.reasons} if entry else set()
    skills = rs.review_skills(
        campaign=campaign,
        response=response,
        names_shown=role in access.STAFF_ROLES,
        flagged=flagged,
    )
    return {
        "campaign": campaign,
        "project": campaign.project,
        "response": response,
        "item": response.item,
        "entry": entry,
        "skills": skills,
        "next_id": rs.queue_next(campaign=campaign, after=response_id, queue=queue),
        "pending": sum(1 for e in queue if e.pending),
        "max_note": services.MAX_NOTE,
        **extra,
    }


@require_http_methods(["GET", "POST"])
@login_required
def review_response(request: HtmxHttpRequest, pk: int, response_id: int) -> HttpResponse:
    campaign, role = access.campaign_get_for_reviewer(request.user, pk)
    if request.method == "GET":
        context = _adjudicate_context(campaign, role, response_id)
        return render(request, template_for(request, ADJUDICATE, "review-card"), context)
    response = _response_or_404(campaign, response_id)
    skills = skills_for_response(response=response, campaign=campaign)
    form = AdjudicationForm(request.POST, skills=skills)
    if form.is_valid():
        values = [(s.skill_id, value, note) for s, value, note in form.chosen()]
        try:
            services.adjudication_save(
                campaign=campaign, response=response, values=values, reviewer=request.user
            )
        except ValidationError as exc:
            form.add_error(None, exc.messages)
        else:
            return _after_save(request, campaign, role, response_id, len(values))
    context = _adjudicate_context(campaign, role, response_id)
    context["errors"] = [e for errors in form.errors.values() for e in errors]
    # htmx 2 does not swap 4xx: errors come back as 200
    return render(request, template_for(request, ADJUDICATE, "review-card"), context)


def _after_save(
    request: HtmxHttpRequest, campaign: Campaign, role: str, response_id: int, saved: int
) -> HttpResponse:
    """The next response of the queue (or the queue when none is pending)."""
    notice = (
        f"Saved {saved} adjudicated score{'s' if saved != 1 else ''} of response {response_id}."
    )
    queue = rs.review_queue(campaign=campaign)
    next_id = rs.queue_next(campaign=campaign, after=response_id, queue=queue)
    if next_id is None:
        messages.success(request, notice + " The queue is done.")
        url = _queue_url(campaign)
        return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    if not request.htmx:
        messages.success(request, notice)
        return redirect(_response_url(campaign, next_id))
    context = _adjudicate_context(campaign, role, next_id, queue=queue, notice=notice)
    response = render(request, f"{ADJUDICATE}#review-card", context)
    response["HX-Push-Url"] = _response_url(campaign, next_id)
    return response


@require_http_methods(["GET", "POST"])
@login_required
def review_settings(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = ReviewSettingsForm.for_campaign(campaign, request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            services.review_settings_update(campaign=campaign, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc.messages)
        else:
            messages.success(request, "Review settings saved.")
            url = reverse("annotation:campaign-detail", args=[campaign.pk]) + "#review-summary"
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    context = {"campaign": campaign, "project": campaign.project, "form": form}
    return render(request, template_for(request, SETTINGS, "settings-form"), context)


@require_GET
@login_required
def review_summary(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The campaign page's review section (loaded by htmx; a page of its own otherwise)."""
    campaign, role = access.campaign_get_for_reviewer(request.user, pk)
    queue = rs.review_queue(campaign=campaign)
    context = {
        "campaign": campaign,
        "project": campaign.project,
        "is_staff": role in access.STAFF_ROLES,
        "pending": sum(1 for e in queue if e.pending),
        "total": len(queue),
        "adaptive": rs.adaptive_summary(campaign=campaign),
        "is_reviewer": role == ProjectRole.REVIEWER,
    }
    return render(request, template_for(request, SUMMARY, "review-summary"), context)
