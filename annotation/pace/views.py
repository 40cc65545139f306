"""The campaign's pace page for its admins and researchers: the cost estimate and the pace
and wage settings form. The campaign page loads its `campaign-pace` partial (htmx, on
load); without JavaScript its link opens this page. Annotators get 403, non-members 404."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotation import access
from annotation.models import Campaign
from annotation.pace.forms import CampaignPaceForm
from annotation.pace.selectors import campaign_cost_estimate
from annotation.pace.services import campaign_pace_update
from flaskweb.htmx import HtmxHttpRequest, template_for

PAGE = "annotation/pace/campaign_pace.html"


def _initial(campaign: Campaign) -> dict:
    return {
        "hourly_wage": campaign.hourly_wage,
        "wage_currency": campaign.wage_currency,
        "break_every": campaign.break_every,
        "break_minutes": campaign.break_minutes,
    }


@require_http_methods(["GET", "POST"])
@login_required
def campaign_pace(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = CampaignPaceForm(request.POST or None, initial=_initial(campaign))
    saved = False
    if request.method == "POST" and form.is_valid():
        try:
            campaign_pace_update(campaign=campaign, **form.cleaned_data)
        except ValidationError as exc:
            campaign.refresh_from_db()
            form.add_error(None, exc.messages)
        else:
            if not request.htmx:
                messages.success(request, "Pace and wage saved.")
                return redirect(reverse("annotation:campaign-detail", args=[pk]) + "#campaign-pace")
            saved = True
            form = CampaignPaceForm(initial=_initial(campaign))
    context = {
        "campaign": campaign,
        "project": campaign.project,
        "form": form,
        "saved": saved,
        "cost": campaign_cost_estimate(campaign=campaign),
    }
    # form errors come back as 200, so htmx 2 swaps them in
    return render(request, template_for(request, PAGE, "campaign-pace"), context)
