"""Template tags of study links (annotation/study/): who is a study participant (for the
annotator bar) and a campaign's study summary (for the campaign page)."""

from __future__ import annotations

from django import template
from django.core.exceptions import ObjectDoesNotExist

from annotation.study import selectors
from annotation.study.middleware import SESSION_PARTICIPANT

register = template.Library()


@register.simple_tag(takes_context=True)
def study_participant(context):
    """The signed-in study participant, or None. Reads the session first, so ordinary
    users cost no query."""
    request = context.get("request")
    session = getattr(request, "session", None)
    if session is None or session.get(SESSION_PARTICIPANT) is None:
        return None
    try:
        return request.user.participant
    except (AttributeError, ObjectDoesNotExist):
        return None


@register.simple_tag(takes_context=True)
def study_work_status(context, participant):
    """Whether the participant has done the study's required work (selectors.
    participant_work_status), once per request: the bar and the card both ask."""
    request = context.get("request")
    cache = getattr(request, "_study_work_status", None)
    if cache is None or cache[0] != participant.pk:
        cache = (participant.pk, selectors.participant_work_status(participant=participant))
        if request is not None:
            request._study_work_status = cache
    return cache[1]


@register.simple_tag
def study_summary(campaign):
    """Links and participants by state of a campaign (two queries)."""
    return selectors.study_summary(campaign=campaign)
