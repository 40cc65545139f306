"""The language of each page (docs/LANGUAGES.md).

Annotator pages (ANNOTATOR_VIEWS) are in the language `language_choose` picks: the one the
annotator picked with the page's picker (kept in the session), the study's language, the
browser's Accept-Language among the languages the campaign offers (among LANGUAGES when no
campaign is in view), else the site's default. A study session's campaign is known from
its session (what it offers is stored there at study entry); a view that loads a campaign
(the scoring page and its posts, the study pages) calls `language_activate_for_campaign`,
which reads what the campaign offers from the process cache keyed by its updated_at: no
query on the scoring path.

Staff pages stay in the site's default language, whatever the browser asks: their text is
not translated, and a page whose `<html lang dir>` named another language than its text
(or that Django's own messages, such as form errors, put in a second language) would be
read wrongly by screen readers and, in Arabic, laid out right to left untested.

Every response says its language (Content-Language); annotator pages also vary on
Accept-Language and Cookie, which choose it."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import translation
from django.utils.cache import patch_vary_headers

from annotation.languages.selectors import (
    campaign_languages,
    default_language,
    language_choose,
    site_languages,
)
from annotation.models import Campaign
from annotation.session_keys import SESSION_PARTICIPANT

#: the language the annotator picked with the picker (a code of LANGUAGES)
SESSION_PICKED = "language_picked"
#: a study session's campaign: [campaign id, its language, the languages it offers]
SESSION_OFFER = "language_offer"

#: URL names of the pages annotators and study participants see (the rest is staff's).
ANNOTATOR_VIEWS = frozenset(
    {
        "annotation:my-campaigns",
        "annotation:annotate",
        "annotation:annotate-submit",
        "annotation:annotate-skip",
        "annotation:study-entry",
        "annotation:study-resume",
        "annotation:study-consent",
        "annotation:study-instructions",
        "annotation:study-finish",
        "annotation:study-continue",
        "annotation:language-pick",
        "login",
        "logout",
    }
)


def language_activate(
    request, *, campaign_id: int | None, fixed: str, offered: Sequence[str]
) -> str:
    """Activate the language of this annotator page (language_choose) and remember what was
    offered, for the picker. Returns the code."""
    session = getattr(request, "session", None)
    picked = session.get(SESSION_PICKED, "") if session is not None else ""
    language = language_choose(
        picked=picked,
        fixed=fixed,
        offered=offered,
        accept=request.META.get("HTTP_ACCEPT_LANGUAGE", ""),
    )
    translation.activate(language)
    request.LANGUAGE_CODE = language
    request.language_offer = (campaign_id, tuple(offered))
    return language


def language_activate_for_campaign(request, campaign: Campaign) -> str:
    """language_activate for a page of `campaign` (loaded by the view); a study session's
    stored offer is brought up to date when the campaign changed."""
    found = campaign_languages(campaign=campaign)
    session = getattr(request, "session", None)
    if session is not None and session.get(SESSION_PARTICIPANT) is not None:
        offer = [campaign.pk, found.fixed, list(found.offered)]
        if session.get(SESSION_OFFER) != offer:
            session[SESSION_OFFER] = offer
    return language_activate(
        request, campaign_id=campaign.pk, fixed=found.fixed, offered=found.offered
    )


def language_offer_store(session, campaign: Campaign) -> None:
    """Store in a study session what its campaign offers (at study entry)."""
    found = campaign_languages(campaign=campaign)
    session[SESSION_OFFER] = [campaign.pk, found.fixed, list(found.offered)]


class AnnotatorLanguageMiddleware:
    """Activate each page's language (after StudySessionMiddleware)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        language = default_language()
        translation.activate(language)
        request.LANGUAGE_CODE = language
        try:
            response = self.get_response(request)
            if getattr(request, "language_offer", None) is not None:
                patch_vary_headers(response, ("Accept-Language", "Cookie"))
            if "Content-Language" not in response:
                response["Content-Language"] = translation.get_language()
            return response
        finally:
            translation.deactivate()

    def process_view(self, request, view_func, view_args, view_kwargs):
        match = request.resolver_match
        if match is None or match.view_name not in ANNOTATOR_VIEWS:
            return None
        session = getattr(request, "session", None)
        offer = None
        if session is not None and session.get(SESSION_PARTICIPANT) is not None:
            offer = session.get(SESSION_OFFER)
        if isinstance(offer, list) and len(offer) == 3:
            campaign_id, fixed, offered = offer
            language_activate(request, campaign_id=campaign_id, fixed=fixed, offered=offered)
        else:
            language_activate(request, campaign_id=None, fixed="", offered=site_languages())
        return None
