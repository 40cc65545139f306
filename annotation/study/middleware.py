"""Single-purpose sessions for study participants.

A worker who came through a study link is signed in with a session marked as a study
session (SESSION_PARTICIPANT, SESSION_CAMPAIGN: set only by the study entry view, removed by
logout's flush). Such a session reaches the study pages, its own campaign's annotate page
and the scoring posts, *My tasks*, the screening pages and logout; any other page sends a
GET to the participant's current step and refuses other methods (403), the API included.
Ordinary sessions pay one dictionary lookup."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect

# re-exported: the study feature's own name for its session key
from annotation.session_keys import SESSION_PARTICIPANT as SESSION_PARTICIPANT

SESSION_CAMPAIGN = "study_campaign"
#: a visit of a known worker id waiting for the resume code (the link and its parameters)
SESSION_PENDING = "study_pending"
#: the participant's resume code, shown on their pages (they typed it or were given it)
SESSION_RESUME_CODE = "study_resume_code"

#: URL names a study session may open (namespace:name), besides its campaign's annotate page.
ALLOWED = {
    "annotation:annotate-submit",
    "annotation:annotate-skip",
    "annotation:my-campaigns",
    "annotation:language-pick",
    "logout",
    "favicon",
}
ALLOWED_PREFIXES = ("annotation:study-", "annotation:screening")


def study_session_allows(view_name: str, kwargs: dict, campaign_id: int | None) -> bool:
    if view_name in ALLOWED or view_name.startswith(ALLOWED_PREFIXES):
        return True
    return view_name == "annotation:annotate" and kwargs.get("pk") == campaign_id


class StudySessionMiddleware:
    """Keep study sessions to their own campaign (after the session and auth middleware)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        """Checked once the URL is resolved (the request's own match: no second resolve);
        a path that resolves to nothing is answered 404 before any view, as before."""
        session = getattr(request, "session", None)
        if session is None or session.get(SESSION_PARTICIPANT) is None:
            return None
        match = request.resolver_match
        if study_session_allows(match.view_name, match.kwargs, session.get(SESSION_CAMPAIGN)):
            return None
        if request.method in ("GET", "HEAD"):
            return redirect("annotation:study-resume")
        raise PermissionDenied("a study session may only use its own study's pages")
