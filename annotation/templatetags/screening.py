"""Template tags of screening (annotation/screening/): the phase label on the scoring card
and the summary on the campaign page, each included with one line by its page."""

from __future__ import annotations

from django import template

from annotation.models import Campaign
from annotation.screening import selectors

register = template.Library()


@register.simple_tag(takes_context=True)
def screening_progress_for(context, campaign: Campaign) -> dict | None:
    """The signed-in annotator's place in the campaign's screening ("Training 2 of 5");
    None (and no query) for a campaign without screening."""
    request = context.get("request")
    if request is None or not getattr(campaign, "screening", False):
        return None
    return selectors.screening_progress(campaign=campaign, user=request.user)


@register.inclusion_tag("annotation/screening/_summary_body.html")
def screening_summary(campaign: Campaign) -> dict:
    """The campaign page's screening section: settings, task counts, annotators per phase."""
    return {"campaign": campaign, "summary": selectors.screening_summary(campaign=campaign)}
