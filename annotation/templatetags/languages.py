"""The annotators' language picker (annotation/languages/): shown on an annotator page
whose campaign offers more than one language."""

from __future__ import annotations

from django import template

from annotation.languages.selectors import language_names

register = template.Library()


@register.inclusion_tag("annotation/languages/_picker.html", takes_context=True)
def language_picker(context):
    """The offered languages of the page's campaign (set on the request by
    annotation.languages.middleware.language_activate), if more than one."""
    request = context.get("request")
    offer = getattr(request, "language_offer", None)
    if request is None or offer is None or offer[0] is None or len(offer[1]) < 2:
        return {"choices": []}
    names = language_names()
    return {
        "choices": [(code, names.get(code, code)) for code in offer[1]],
        "campaign_id": offer[0],
        "current": getattr(request, "LANGUAGE_CODE", ""),
        "next": request.get_full_path() if request.method == "GET" else "",
        "csrf_token": context.get("csrf_token"),
    }
