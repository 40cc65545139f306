"""Study pages (docs/CROWD.md).

Researchers (the campaign's project staff): the campaign's study page with its links,
settings and participants; create a link; close or reopen one.

Workers: the entry link /study/<token>/?<platform parameters> signs them in to their
password-less account in a study session (annotation/study/middleware.py), then the
consent page, the campaign's instructions, the annotate page and the completion page.
A browser signed in as someone else is refused (409) with a sign-out button, never signed
out by merely opening a link: a link cannot take over another person's session."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation import access
from annotation.languages.middleware import language_activate_for_campaign, language_offer_store
from annotation.languages.selectors import campaign_texts
from annotation.models import Campaign, Participant, ParticipantState, Platform, StudyLink
from annotation.study import platforms, services
from annotation.study import selectors as ss
from annotation.study.forms import (
    ConsentForm,
    FinishForm,
    QualityRulesForm,
    ResumeForm,
    StudyLinkForm,
    StudyLinkStatusForm,
    StudySettingsForm,
)
from annotation.study.middleware import (
    SESSION_CAMPAIGN,
    SESSION_PARTICIPANT,
    SESSION_PENDING,
    SESSION_RESUME_CODE,
)
from annotation.study.services import entry_message
from flaskweb.htmx import HtmxHttpRequest
from flaskweb.security import CONTENT_SECURITY_POLICY

PAGE = "annotation/study/campaign_study.html"
MESSAGE = "annotation/study/message.html"
SESSION_INSTRUCTIONS = "study_instructions_seen"
#: Who may frame the MTurk entry pages (an external question is shown in an iframe there).
MTURK_FRAMERS = "https://www.mturk.com https://worker.mturk.com https://workersandbox.mturk.com"
BACKEND = "flaskweb.auth_backend.ModelBackend"


# --- researchers -----------------------------------------------------------------------------


def _study_url(campaign: Campaign, anchor: str = "") -> str:
    url = reverse("annotation:campaign-study", args=[campaign.pk])
    return f"{url}#{anchor}" if anchor else url


def _page_context(request: HtmxHttpRequest, campaign: Campaign, **forms: Any) -> dict[str, Any]:
    links = ss.study_link_list(campaign=campaign)
    for link in links:
        entry = reverse("annotation:study-entry", args=[link.token])
        link.full_url = request.build_absolute_uri(entry) + ss.study_link_query_template(  # type: ignore[attr-defined]
            platform=link.platform
        )
    initial = {
        "consent_text": campaign.consent_text,
        "completion_code": campaign.completion_code,
        "screenout_code": campaign.screenout_code,
    }
    return {
        "campaign": campaign,
        "project": campaign.project,
        "links": links,
        "participants": ss.participant_list(campaign=campaign),
        "summary": ss.study_summary(campaign=campaign),
        "link_form": forms.get("link_form") or StudyLinkForm(),
        "settings_form": forms.get("settings_form") or StudySettingsForm(initial=initial),
    }


@require_http_methods(["GET", "POST"])
@login_required
def campaign_study(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The campaign's study page; POST saves the consent text and the codes."""
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = StudySettingsForm(request.POST) if request.method == "POST" else None
    if form is not None and form.is_valid():
        try:
            services.study_settings_update(campaign=campaign, **form.cleaned_data)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, "Study settings saved.")
            return redirect(_study_url(campaign, "study-settings"))
    return render(request, PAGE, _page_context(request, campaign, settings_form=form))


@require_POST
@login_required
def campaign_study_link_create(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = StudyLinkForm(request.POST)
    if form.is_valid():
        try:
            link = services.study_link_create(
                campaign=campaign, created_by=request.user, **form.cleaned_data
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"{link.get_platform_display()} link created.")
            return redirect(_study_url(campaign, "study-links"))
    return render(request, PAGE, _page_context(request, campaign, link_form=form))


@require_POST
@login_required
def campaign_study_link_status(request: HtmxHttpRequest, pk: int, link_id: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    try:
        link = ss.study_link_get_for_campaign(campaign=campaign, link_id=link_id)
    except StudyLink.DoesNotExist:
        return render(
            request,
            MESSAGE,
            {"title": "No such link", "message": "No such study link."},
            status=404,
        )
    form = StudyLinkStatusForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Say whether the link is to be open or closed.")
    else:
        services.study_link_set_open(link=link, is_open=form.cleaned_data["is_open"])
        messages.success(request, f"Link {'opened' if link.is_open else 'closed'}.")
    return redirect(_study_url(campaign, "study-links"))


APPROVAL_PAGE_SIZE = 200


@require_http_methods(["GET", "POST"])
@login_required
def campaign_study_participants(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Approving participants: per participant the work done, its quality figures, flags
    and the suggested decision, with the ids to paste into the platform's bulk approve and
    a CSV (?format=csv, or ?format=mturk for MTurk's batch upload); ?decision= filters.
    POST saves the campaign's quality rules."""
    from annotation.study import quality

    campaign = access.campaign_get_for_staff(request.user, pk)
    rules = quality.quality_rules_clean(campaign.quality_rules)
    form = QualityRulesForm(request.POST if request.method == "POST" else None, rules=rules)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            values = {k: v for k, v in form.cleaned_data.items() if k != "screen_out"}
            for name, value in values.items():
                if value is None and name in quality.REQUIRED_RULES:  # cannot be off
                    values[name] = quality.QUALITY_RULE_DEFAULTS[name]
            try:
                services.quality_rules_update(
                    campaign=campaign, rules=values, screen_out=form.cleaned_data["screen_out"]
                )
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                messages.success(request, "Quality rules saved; the figures below use them.")
                return redirect(reverse("annotation:campaign-study-participants", args=[pk]))
        status = 400
    elif not form.is_bound:
        form.fields["screen_out"].initial = campaign.quality_screen_out
    decision = request.GET.get("decision", "")
    if decision and decision not in ss.DECISIONS:
        decision = ""
    everyone = ss.participant_approval_rows(campaign=campaign)  # the figures, computed once
    rows = [r for r in everyone if r.decision == decision] if decision else everyone
    fmt = request.GET.get("format", "")
    if fmt in ("csv", "mturk"):
        return _approval_csv(campaign, rows, decision=decision, mturk=fmt == "mturk")
    counts = {key: 0 for key in ss.DECISIONS}
    for row in everyone:
        counts[row.decision] += 1
    try:
        page = max(1, int(request.GET.get("page", "1")))
    except ValueError:
        page = 1
    pages = max(1, -(-len(rows) // APPROVAL_PAGE_SIZE))
    page = min(page, pages)
    context = {
        "campaign": campaign,
        "project": campaign.project,
        "rows": rows[(page - 1) * APPROVAL_PAGE_SIZE : page * APPROVAL_PAGE_SIZE],
        "total": len(rows),
        "page": page,
        "pages": pages,
        "decision": decision,
        "decisions": [(k, label, counts[k]) for k, label in ss.DECISIONS.items()],
        "approve_ids": "\n".join(r.worker_id for r in rows if r.decision == "approve"),
        "form": form,
    }
    return render(request, "annotation/study/participants.html", context, status=status)


def _approval_csv(campaign: Campaign, rows, *, decision: str, mturk: bool) -> HttpResponse:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerows(ss.approval_csv_rows(rows, mturk=mturk))
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    name = f"campaign-{campaign.pk}-participants{'-' + decision if decision else ''}"
    name += "-mturk" if mturk else ""
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


# --- workers: the entry link -------------------------------------------------------------------


def _message(
    request: HtmxHttpRequest, title: str, message: str, *, status: int = 200, **extra: Any
) -> HttpResponse:
    return render(request, MESSAGE, {"title": title, "message": message, **extra}, status=status)


def _refusal(request: HtmxHttpRequest, exc: services.StudyError) -> HttpResponse:
    titles = {
        "closed": gettext("This study is closed"),
        "full": gettext("This study is full"),
        "rate_limited": gettext("Please wait a minute"),
        "not_found": gettext("No such study"),
    }
    return _message(
        request,
        titles.get(exc.code, gettext("This link cannot be used")),
        str(exc),
        status=exc.status,
    )


def _frameable_by_mturk(response: HttpResponse) -> HttpResponse:
    response.xframe_options_exempt = True  # type: ignore[attr-defined]
    response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY.replace(
        "frame-ancestors 'none'", f"frame-ancestors {MTURK_FRAMERS}"
    )
    return response


@require_GET
def study_entry(request: HtmxHttpRequest, token: str) -> HttpResponse:
    address = request.META.get("REMOTE_ADDR", "")
    try:
        services.study_entry_throttle(address=address)
        link = services.study_link_get_for_entry(token=token)
        services.study_entry_throttle(address=address, link=link)
    except services.StudyError as exc:
        return _refusal(request, exc)
    params = {key: request.GET.get(key, "") for key in request.GET}
    if link.platform == Platform.MTURK:
        framed = request.headers.get("Sec-Fetch-Dest") == "iframe"
        if platforms.is_mturk_preview(link.platform, params) or framed:
            # MTurk shows the HIT in a frame, where browsers keep no session cookie of
            # ours: the study runs in its own tab, opened from here (no account is made).
            context = {
                "campaign": link.campaign,
                "preview": not framed,
                "start_url": request.get_full_path(),
            }
            return _frameable_by_mturk(
                render(request, "annotation/study/mturk_start.html", context)
            )
    try:
        worker_id = platforms.entry_parse(link.platform, params).worker_id
    except platforms.Preview as exc:
        return _message(request, gettext("A preview of this study link"), entry_message(exc))
    except platforms.BadEntry as exc:
        return _message(
            request, gettext("This link cannot be used"), entry_message(exc), status=400
        )
    if request.user.is_authenticated and not _same_worker(request, link, worker_id):
        return _message(
            request,
            gettext("You are signed in as someone else"),
            gettext(
                "This browser is signed in to another account. Sign out first, then the study "
                "starts for you; or open the link in a private window."
            ),
            status=409,
            signout_next=request.get_full_path(),
        )
    bound = _browser_participants(request)
    session_participant = request.session.get(SESSION_PARTICIPANT)
    proven: set[int] = set(bound)
    if request.user.is_authenticated and isinstance(session_participant, int):
        proven.add(session_participant)
    try:
        admission = services.participant_enter(
            link=link, params=params, proven_ids=frozenset(proven)
        )
    except services.StudyError as exc:
        if exc.code == "resume_needed":
            # nothing changed: the visit must prove it is theirs with the resume code
            request.session[SESSION_PENDING] = {
                "link": link.pk,
                "params": platforms.entry_params(link.platform, params),
            }
            return redirect("annotation:study-continue")
        return _refusal(request, exc)
    return _admit(
        request,
        admission.participant,
        resume_code=admission.resume_code or bound.get(admission.participant.pk, ""),
    )


def _admit(request: HtmxHttpRequest, participant: Participant, *, resume_code: str) -> HttpResponse:
    """Sign the participant in to a study session, bind this browser to them (the signed
    study cookie) and send them to their current step."""
    if not participant.user.is_active:
        request.session.flush()  # whatever study session this browser had ends here
        return _message(
            request,
            gettext("Thank you"),
            gettext("You can no longer take part in this study."),
            status=403,
        )
    if not request.user.is_authenticated:
        login(request, participant.user, backend=BACKEND)
    _session_bind(request, participant)
    request.session.pop(SESSION_PENDING, None)
    if resume_code:
        request.session[SESSION_RESUME_CODE] = resume_code
    response = redirect("annotation:study-resume")
    bound = _browser_participants(request)
    bound[participant.pk] = request.session.get(SESSION_RESUME_CODE, "")
    _browser_bind(response, bound)
    return response


#: The signed cookie that binds a browser to the participants who started there: a JSON
#: map of participant id -> their resume code (shown on their pages). Signed with the
#: site's key, so it cannot be made up; long-lived, so the same browser comes back to the
#: study from the platform days later without a code.
STUDY_COOKIE = "flaskweb_study"
STUDY_COOKIE_SALT = "annotation.study.browser"
MAX_BOUND = 20


def _browser_participants(request: HtmxHttpRequest) -> dict[int, str]:
    raw = request.get_signed_cookie(
        STUDY_COOKIE,
        default="",
        salt=STUDY_COOKIE_SALT,
        max_age=settings.FLASKWEB_STUDY_COOKIE_DAYS * 86400,
    )
    try:
        data = json.loads(raw) if raw else {}
        return {int(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (ValueError, TypeError):
        return {}


def _browser_bind(response: HttpResponse, bound: dict[int, str]) -> None:
    newest = dict(list(bound.items())[-MAX_BOUND:])
    response.set_signed_cookie(
        STUDY_COOKIE,
        json.dumps({str(k): v for k, v in newest.items()}, separators=(",", ":")),
        salt=STUDY_COOKIE_SALT,
        max_age=settings.FLASKWEB_STUDY_COOKIE_DAYS * 86400,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


@require_http_methods(["GET", "POST"])
def study_continue(request: HtmxHttpRequest) -> HttpResponse:
    """Continue a study on another browser: the visit gave a known worker id without the
    browser that started, so it needs the resume code the participant was shown."""
    pending = request.session.get(SESSION_PENDING)
    link_id = pending.get("link") if isinstance(pending, dict) else None
    link = None
    if isinstance(link_id, int):
        link = StudyLink.objects.select_related("campaign").filter(pk=link_id).first()
    if link is None or not isinstance(pending, dict):
        return _message(
            request,
            gettext("Open the study link again"),
            gettext("Please open the study link again from your recruiting platform."),
            status=400,
        )
    form = ResumeForm(request.POST or None)
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            participant = services.participant_resume_with_code(
                link=link,
                params=pending["params"],
                code=form.cleaned_data["code"],
                address=request.META.get("REMOTE_ADDR", ""),
            )
        except services.StudyError as exc:
            form.add_error("code", str(exc))
            status = exc.status
        else:
            request.session[SESSION_RESUME_CODE] = services.resume_code_format(
                form.cleaned_data["code"]
            )
            return _admit(request, participant, resume_code=request.session[SESSION_RESUME_CODE])
    elif request.method == "POST":
        status = 400
    context = {"campaign": link.campaign, "form": form}
    return render(request, "annotation/study/continue.html", context, status=status)


def _session_bind(request: HtmxHttpRequest, participant: Participant) -> None:
    """Mark the session as this participant's study session. Its campaign's annotate page
    opens only while they work: not before they consent, not after they finish."""
    request.session[SESSION_PARTICIPANT] = participant.pk
    language_offer_store(request.session, participant.campaign)  # its pages' languages
    if participant.state == ParticipantState.WORKING:
        request.session[SESSION_CAMPAIGN] = participant.campaign_id
    else:
        request.session.pop(SESSION_CAMPAIGN, None)


def _same_worker(request: HtmxHttpRequest, link: StudyLink, worker_id: str) -> bool:
    """Whether the signed-in session is the study session of this link's worker."""
    participant_id = request.session.get(SESSION_PARTICIPANT)
    if participant_id is None:
        return False
    participant = ss.participant_for_session(participant_id=participant_id, user=request.user)
    return (
        participant is not None
        and participant.campaign_id == link.campaign_id
        and participant.platform == link.platform
        and participant.worker_id == worker_id
    )


# --- workers: the steps of a study session --------------------------------------------------


def _participant(request: HtmxHttpRequest) -> Participant | HttpResponse:
    """The participant of this study session, or the page that says there is none."""
    participant_id = request.session.get(SESSION_PARTICIPANT)
    participant = None
    if participant_id is not None and request.user.is_authenticated:
        participant = ss.participant_for_session(participant_id=participant_id, user=request.user)
    if participant is not None:
        language_activate_for_campaign(request, participant.campaign)
        return participant
    if not request.user.is_authenticated:
        return _message(
            request,
            gettext("Your study session has ended"),
            gettext("Please open the study link again from your recruiting platform to continue."),
            status=403,
        )
    return _message(
        request,
        gettext("No study here"),
        gettext("You did not come through a study link."),
        status=404,
    )


@require_GET
def study_resume(request: HtmxHttpRequest) -> HttpResponse:
    """Where a participant stands: consent, instructions, tasks, or their code."""
    participant = _participant(request)
    if isinstance(participant, HttpResponse):
        return participant
    state = participant.state
    if state == ParticipantState.CONSENT:
        return redirect("annotation:study-consent")
    if state == ParticipantState.DECLINED:
        return _declined(request)
    if state in (ParticipantState.COMPLETED, ParticipantState.SCREENED_OUT):
        return redirect("annotation:study-finish")
    if participant.campaign.instructions and not request.session.get(SESSION_INSTRUCTIONS):
        return redirect("annotation:study-instructions")
    return redirect("annotation:annotate", participant.campaign_id)


def _declined(request: HtmxHttpRequest) -> HttpResponse:
    return _message(
        request,
        gettext("Thank you"),
        gettext(
            "You did not agree to take part, so the study ends here and nothing was recorded "
            "about your work. Please return the study on your platform. You may close this page."
        ),
    )


@require_http_methods(["GET", "POST"])
def study_consent(request: HtmxHttpRequest) -> HttpResponse:
    participant = _participant(request)
    if isinstance(participant, HttpResponse):
        return participant
    if participant.state != ParticipantState.CONSENT:
        return redirect("annotation:study-resume")
    form = ConsentForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        participant = services.participant_consent(
            participant=participant, agree=form.cleaned_data["answer"] == "agree"
        )
        _session_bind(request, participant)
        return redirect("annotation:study-resume")
    context = {"campaign": participant.campaign, "form": form, "texts": _texts(participant)}
    return render(request, "annotation/study/consent.html", context)


def _texts(participant: Participant):
    """The campaign's texts in the page's language (annotation/languages/)."""
    return campaign_texts(campaign=participant.campaign, language=translation.get_language())


@require_GET
def study_instructions(request: HtmxHttpRequest) -> HttpResponse:
    participant = _participant(request)
    if isinstance(participant, HttpResponse):
        return participant
    if participant.state != ParticipantState.WORKING:
        return redirect("annotation:study-resume")
    request.session[SESSION_INSTRUCTIONS] = True
    context = {"campaign": participant.campaign, "texts": _texts(participant)}
    return render(request, "annotation/study/instructions.html", context)


@require_http_methods(["GET", "POST"])
def study_finish(request: HtmxHttpRequest) -> HttpResponse:
    """GET: the code and the way back to the platform once finished; before that, whether
    the required work is done (then *Finish and get my completion code* is the main
    action) or what is left (then *Back to the tasks*, and leaving without a code).
    POST finish: completed only when the work is done (else the page says what is left,
    409, nothing changes); POST leave: the study ends without a code."""
    participant = _participant(request)
    if isinstance(participant, HttpResponse):
        return participant
    refusal = ""
    if request.method == "POST":
        form = FinishForm(request.POST)
        leave = form.is_valid() and form.cleaned_data["action"] == "leave"
        try:
            participant = services.participant_finish(participant=participant, leave=leave)
        except services.StudyError as exc:
            refusal = str(exc)
        else:
            _session_bind(request, participant)
            return redirect("annotation:study-finish")
    if participant.state in (ParticipantState.CONSENT, ParticipantState.DECLINED):
        return redirect("annotation:study-resume")
    context: dict[str, Any] = {
        "campaign": participant.campaign,
        "participant": participant,
        "done": ss.participant_done_count(participant=participant),
        "resume_code": request.session.get(SESSION_RESUME_CODE, ""),
        "texts": _texts(participant),
    }
    if participant.state == ParticipantState.WORKING:
        context["work"] = ss.participant_work_status(participant=participant)
        context["refusal"] = refusal
        return render(
            request, "annotation/study/finish.html", context, status=409 if refusal else 200
        )
    completion = services.participant_completion(participant=participant, link=participant.link)
    context["completion"] = completion
    response = render(request, "annotation/study/finish.html", context)
    if completion.submit_url:  # the MTurk form posts to MTurk: allow that one origin
        origin = platforms.origin_of(completion.submit_url)
        response["Content-Security-Policy"] = CONTENT_SECURITY_POLICY.replace(
            "form-action 'self'", f"form-action 'self' {origin}"
        )
    return response
