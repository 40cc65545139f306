"""Pure rules of the recruiting platforms (no Django): which query parameters each platform
appends to a study link, how they are validated, the link's query template a researcher
pastes into the platform, and the checks of every URL the completion page may send a
worker to (the researcher's completion URL, MTurk's turkSubmitTo).

Everything here is hostile input: worker ids and URLs arrive from the address bar."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

PROLIFIC = "prolific"
MTURK = "mturk"
SONA = "sona"
GENERIC = "generic"

#: A platform id: Prolific's are 24 hex digits, MTurk's 12-14 capitals and digits, SONA's
#: numbers; anything in this alphabet and length is accepted, nothing else.
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,100}")
#: What MTurk sends as assignmentId while a worker previews a HIT (no account is made).
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
MAX_SUBMIT_TO = 300
MAX_COMPLETION_URL = 500
#: Hosts a completion URL may use over plain http (a researcher's own machine).
LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
PLACEHOLDERS = ("{code}", "{worker}")
#: Prolific's completion page (the code goes in ?cc=).
PROLIFIC_COMPLETE = "https://app.prolific.com/submissions/complete?cc={code}"
#: Where MTurk may receive a HIT's answer (turkSubmitTo); anything else is refused.
MTURK_SUBMIT_HOSTS = ("https://www.mturk.com", "https://workersandbox.mturk.com")


@dataclass(frozen=True)
class PlatformParams:
    """Which query parameter carries what, per platform."""

    worker: str
    study: str = ""
    session: str = ""
    submit_to: str = ""
    #: the query a researcher appends to the link in the platform (its own placeholders)
    template: str = ""


PARAMS: dict[str, PlatformParams] = {
    PROLIFIC: PlatformParams(
        worker="PROLIFIC_PID",
        study="STUDY_ID",
        session="SESSION_ID",
        template="?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}"
        "&SESSION_ID={{%SESSION_ID%}}",
    ),
    # MTurk appends assignmentId, hitId, turkSubmitTo and workerId to an external question's
    # URL by itself: the link is pasted as it is.
    MTURK: PlatformParams(
        worker="workerId", study="hitId", session="assignmentId", submit_to="turkSubmitTo"
    ),
    SONA: PlatformParams(worker="id", template="?id=%SURVEY_CODE%"),
    GENERIC: PlatformParams(worker="worker", template="?worker="),
}


def gettext_noop(message: str) -> str:
    """Marks a worker-facing message for the translation catalogues (makemessages finds the
    call by its name) and returns it untranslated: this module is pure, the page that shows
    the message translates it (BadEntry.template, BadEntry.params)."""
    return message


class BadEntry(ValueError):
    """A study link opened with parameters that cannot be used; the message says why.
    `template` is the English message with %(name)s placeholders, `params` their values:
    a page shows `gettext(template) % params`; str() is the English message."""

    def __init__(self, template: str, **params: str) -> None:
        self.template, self.params = template, params
        super().__init__(template % params if params else template)


class Preview(BadEntry):
    """A study link opened with the platform's placeholder still in place of the worker id
    (the researcher trying the link, or the platform's own preview): no account is made."""


#: A placeholder a platform replaces with the worker's id: {{%PROLIFIC_PID%}}, %SURVEY_CODE%,
#: ${...}; seen unreplaced when the link is previewed or pasted as it is.
PLACEHOLDER = re.compile(r"\{\{%[^%]*%\}\}|%[A-Za-z_]+%|\$\{[^}]*\}")


@dataclass(frozen=True)
class Entry:
    """The platform ids of one visit to a study link, validated."""

    worker_id: str
    study_id: str = ""
    session_id: str = ""
    submit_to: str = ""


def _one(params: Mapping[str, str], name: str) -> str:
    value = params.get(name, "")
    return value if isinstance(value, str) else ""


def is_mturk_preview(platform: str, params: Mapping[str, str]) -> bool:
    """A worker previewing an MTurk HIT (no assignment yet)."""
    return platform == MTURK and _one(params, "assignmentId") == MTURK_PREVIEW


def entry_params(platform: str, params: Mapping[str, str]) -> dict[str, str]:
    """Only the query parameters the platform's entry reads (to keep between two pages)."""
    spec = PARAMS.get(platform)
    names = (spec.worker, spec.study, spec.session, spec.submit_to) if spec else ()
    return {name: _one(params, name) for name in names if name and name in params}


def entry_parse(platform: str, params: Mapping[str, str]) -> Entry:
    """The validated ids of a visit; raises BadEntry with a message for the worker."""
    spec = PARAMS.get(platform)
    if spec is None:
        raise BadEntry(gettext_noop("This study link is of an unknown kind."))
    worker = _one(params, spec.worker).strip()
    if PLACEHOLDER.fullmatch(worker):
        raise Preview(
            gettext_noop(
                "This is a preview of the study link: the “%(name)s” parameter still holds "
                "the platform's placeholder %(placeholder)s. A participant who opens the study "
                "from the platform gets their own id there and starts the study here. No "
                "account was made."
            ),
            name=spec.worker,
            placeholder=worker,
        )
    if not worker:
        raise BadEntry(
            gettext_noop(
                "The link was opened without the “%(name)s” parameter that identifies you. "
                "Please open it again from the page of the study on your recruiting platform."
            ),
            name=spec.worker,
        )
    if not ID_PATTERN.fullmatch(worker):
        raise BadEntry(
            gettext_noop(
                "The “%(name)s” parameter is not a valid id (letters, digits, - and _ only, "
                "at most 100). Please open the link again from your recruiting platform."
            ),
            name=spec.worker,
        )
    ids = {}
    for field, name in (("study_id", spec.study), ("session_id", spec.session)):
        value = _one(params, name).strip() if name else ""
        if value and not ID_PATTERN.fullmatch(value):
            raise BadEntry(gettext_noop("The “%(name)s” parameter is not a valid id."), name=name)
        ids[field] = value
    if platform == MTURK and not ids["session_id"]:
        raise BadEntry(
            gettext_noop("The link was opened without an MTurk assignment (assignmentId).")
        )
    submit_to = _one(params, spec.submit_to).strip() if spec.submit_to else ""
    if len(submit_to) > MAX_SUBMIT_TO:
        raise BadEntry(gettext_noop("The “turkSubmitTo” parameter is too long."))
    return Entry(worker_id=worker, submit_to=submit_to, **ids)


# --- URLs the completion page may send a worker to ------------------------------------------


def completion_url_check(url: str) -> str:
    """A researcher's completion URL, stripped; raises BadEntry unless it is https (http only
    for this machine), has a host, no credentials, no spaces or control characters, at most
    MAX_COMPLETION_URL characters, and braces only in the {code} and {worker} placeholders."""
    url = url.strip()
    if not url:
        return ""
    if len(url) > MAX_COMPLETION_URL:
        raise BadEntry(f"The completion URL is longer than {MAX_COMPLETION_URL} characters.")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise BadEntry("The completion URL contains spaces or control characters.")
    rest = url
    for placeholder in PLACEHOLDERS:
        rest = rest.replace(placeholder, "")
    if "{" in rest or "}" in rest:
        raise BadEntry("The completion URL may use only the {code} and {worker} placeholders.")
    try:
        parts = urlsplit(url.replace("{code}", "CODE").replace("{worker}", "WORKER"))
        host = parts.hostname or ""
        parts.port  # noqa: B018 (a bad port raises ValueError)
    except ValueError:
        raise BadEntry("The completion URL is not a valid URL.") from None
    if parts.scheme not in ("https", "http") or not host:
        raise BadEntry("The completion URL must start with https:// and name a host.")
    if parts.scheme == "http" and host not in LOCAL_HOSTS:
        raise BadEntry("The completion URL must use https (http only for localhost).")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise BadEntry("The completion URL must not carry a user name or password.")
    if "\\" in url:
        raise BadEntry("The completion URL must not contain backslashes.")
    return url


def completion_url_fill(url: str, *, code: str, worker_id: str) -> str:
    """The completion URL with its placeholders replaced (each value percent-encoded)."""
    return url.replace("{code}", quote(code, safe="")).replace(
        "{worker}", quote(worker_id, safe="")
    )


def mturk_submit_url(submit_to: str, *, allowed: Sequence[str] = MTURK_SUBMIT_HOSTS) -> str:
    """The external-question submit URL for MTurk's turkSubmitTo, or "" when turkSubmitTo is
    not exactly one of the allowed origins (a trailing slash is forgiven)."""
    origin = submit_to.strip().rstrip("/")
    if not origin or origin not in {a.rstrip("/") for a in allowed}:
        return ""
    return f"{origin}/mturk/externalSubmit"


def origin_of(url: str) -> str:
    """scheme://host[:port] of a checked URL (for a form-action source)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"
