"""The screening page of a campaign (its researchers and admins): turn screening on or
off, set the pass mark and rule, add and remove training and qualification tasks, and see
the results per annotator (also as CSV). Annotators get 403, non-members 404."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation import access
from annotation.campaigns import selectors as cs
from annotation.models import Campaign
from annotation.screening import selectors, services, setup
from annotation.screening.forms import (
    ScreeningSettingsForm,
    ScreeningTaskForm,
    ScreeningTaskRemoveForm,
)
from flaskweb.htmx import HtmxHttpRequest, template_for

PAGE = "annotation/screening/screening.html"


def _page_url(campaign: Campaign, anchor: str = "") -> str:
    url = reverse("annotation:screening", args=[campaign.pk])
    return f"{url}#{anchor}" if anchor else url


def _task_form(campaign: Campaign, data=None) -> ScreeningTaskForm:
    return ScreeningTaskForm(
        data,
        campaign=campaign,
        skills=cs.campaign_skill_list(campaign=campaign),
        model_names=cs.dataset_model_names(dataset=campaign.dataset),
    )


def _context(
    campaign: Campaign,
    *,
    settings_form: ScreeningSettingsForm | None = None,
    task_form: ScreeningTaskForm | None = None,
    task_error: str = "",
) -> dict[str, Any]:
    return {
        "campaign": campaign,
        "project": campaign.project,
        "summary": selectors.screening_summary(campaign=campaign),
        "settings_form": settings_form or ScreeningSettingsForm.for_campaign(campaign),
        "task_form": task_form or _task_form(campaign),
        "task_error": task_error,
        "tasks": setup.screening_task_list(campaign=campaign),
        "results": selectors.screening_results(campaign=campaign),
    }


@require_GET
@login_required
def screening(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    # htmx asks for the results table alone (its Refresh button)
    template = template_for(request, PAGE, "screening-results")
    return render(request, template, _context(campaign))


@require_POST
@login_required
def screening_settings(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = ScreeningSettingsForm.for_campaign(campaign, request.POST)
    saved = False
    if form.is_valid():
        try:
            campaign = services.screening_settings_update(
                campaign=campaign, **form.screening_settings()
            )
            saved = True
        except ValidationError as exc:
            form.add_error(None, exc.messages)
    if saved and not request.htmx:
        messages.success(request, "Screening settings saved.")
        return redirect(_page_url(campaign))
    context = _context(campaign, settings_form=None if saved else form)
    context["settings_saved"] = saved
    return render(request, template_for(request, PAGE, "screening-settings"), context)


@require_POST
@login_required
def screening_task_set(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = _task_form(campaign, request.POST)
    saved = None
    if form.is_valid():
        try:
            saved = setup.screening_task_set(campaign=campaign, **form.screening_settings())
        except ValidationError as exc:
            form.add_error(None, exc.messages)
    if saved is not None and not request.htmx:
        messages.success(request, f"Task {saved.pk} is now a {saved.kind} task.")
        return redirect(_page_url(campaign, "screening-tasks"))
    context = _context(campaign, task_form=None if saved else form)
    context["saved"] = saved
    return render(request, template_for(request, PAGE, "screening-tasks"), context)


@require_POST
@login_required
def screening_task_remove(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = ScreeningTaskRemoveForm(request.POST)
    error = ""
    if not form.is_valid():
        error = "Say which task to remove."
    else:
        try:
            services.screening_task_remove(campaign=campaign, task_id=form.cleaned_data["task"])
        except ValidationError as exc:
            error = " ".join(exc.messages)
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(request, "Task removed.")
        return redirect(_page_url(campaign, "screening-tasks"))
    context = _context(campaign, task_error=error)
    context["removed"] = not error
    return render(request, template_for(request, PAGE, "screening-tasks"), context)


#: What a spreadsheet would read as the start of a formula (OWASP "CSV injection").
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(_FORMULA_PREFIXES):
        return "'" + value
    return "" if value is None else value


@require_GET
@login_required
def screening_results_csv(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The results per annotator as CSV: one row per annotator and skill (a row without a
    skill for those not decided yet). Usernames are protected against formula injection."""
    campaign = access.campaign_get_for_staff(request.user, pk)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [
            "campaign_id",
            "annotator",
            "phase",
            "score",
            "decided_at",
            "training_answered",
            "qualification_answered",
            "skill",
            "agreed",
            "total",
            "agreement",
        ]
    )
    for r in selectors.screening_results(campaign=campaign):
        head = [
            campaign.pk,
            r.username,
            r.phase,
            r.score,
            r.decided_at.isoformat() if r.decided_at else None,
            r.training_answered,
            r.qualification_answered,
        ]
        tails: list[list[Any]] = [[s.skill, s.agreed, s.total, s.share] for s in r.skills]
        for tail in tails or [[None] * 4]:
            writer.writerow([_cell(v) for v in head + tail])
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-screening.csv"'
    return response
