"""The active selection page of a campaign (its project's admins and researchers, as the
campaign pages: 404 for non-members, 403 for annotators): make the plan, change it for
later batches, and draw the next batch (an htmx POST naming the batch it expects, so a
double click draws once)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from analytics.active import selectors, services
from analytics.active.forms import DrawForm, PlanCreateForm, PlanSettingsForm
from annotation.access import campaign_get_for_staff
from annotation.models import Campaign
from flaskweb.htmx import HtmxHttpRequest, template_for
from judging.models import RunStatus

PAGE = "analytics/active/selection.html"


def _page_url(campaign: Campaign) -> str:
    return reverse("analytics:active-selection", args=[campaign.pk])


def _context(
    campaign: Campaign, form: PlanSettingsForm | None = None, draw_error: str = ""
) -> dict[str, Any]:
    state = selectors.selection_state(campaign=campaign)
    runs = selectors.run_list_for_campaign(campaign=campaign)
    finished = [r for r in runs if r.status == RunStatus.DONE]
    if form is None:
        form = (
            PlanSettingsForm(plan=state.plan)
            if state.plan is not None
            else PlanCreateForm(runs=finished)
        )
    return {
        "campaign": campaign,
        "project": campaign.project,
        "state": state,
        "form": form,
        "unfinished_runs": [r for r in runs if r.status != RunStatus.DONE],
        "draw_error": draw_error,
    }


@require_http_methods(["GET", "POST"])
@login_required
def active_selection(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET: the page. POST: make the plan, or change the one there for later batches."""
    campaign = campaign_get_for_staff(request.user, pk)
    if request.method == "GET":
        return render(request, template_for(request, PAGE, "selection-batches"), _context(campaign))
    plan = selectors.plan_get(campaign=campaign)
    form: PlanSettingsForm
    if plan is None:
        runs = [
            r
            for r in selectors.run_list_for_campaign(campaign=campaign)
            if r.status == RunStatus.DONE
        ]
        form = PlanCreateForm(request.POST, runs=runs)
    else:
        form = PlanSettingsForm(request.POST, plan=plan)
    if form.is_valid():
        try:
            if plan is None:
                services.selection_plan_create(
                    campaign=campaign, created_by=request.user, **form.plan_settings()
                )
            else:
                services.selection_plan_update(plan=plan, **form.plan_settings())
        except ValidationError as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, "Plan saved." if plan else "Plan made: draw its first batch.")
            url = _page_url(campaign)
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    return render(request, PAGE, _context(campaign, form))


def _form_errors(form: PlanSettingsForm, exc: ValidationError) -> None:
    """A service's refusal on the form: under its field when the form has it."""
    if hasattr(exc, "error_dict"):
        for name, errors in exc.message_dict.items():
            form.add_error(name if name in form.fields else None, errors)
    else:
        form.add_error(None, exc.messages)


@require_POST
@login_required
def active_selection_draw(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Draw the batch the form names: the batches section again (htmx), or the page."""
    campaign = campaign_get_for_staff(request.user, pk)
    form = DrawForm(request.POST)
    error = ""
    plan = selectors.plan_get(campaign=campaign)
    if plan is None:
        error = "make a plan first"
    elif not form.is_valid():
        error = "no batch named: reload the page and draw again"
    else:
        try:
            batch, created = services.selection_batch_draw(
                plan=plan, number=form.cleaned_data["batch"], created_by=request.user
            )
        except ValidationError as exc:
            error = " ".join(exc.messages)
        else:
            if not request.htmx:
                messages.success(
                    request,
                    f"Batch {batch.number}: {batch.drawn} of {batch.size} responses drawn for "
                    "people." + ("" if created else " (It was already drawn.)"),
                )
    if request.htmx:
        return render(request, f"{PAGE}#selection-batches", _context(campaign, draw_error=error))
    if error:
        messages.error(request, error)
    return redirect(_page_url(campaign))
