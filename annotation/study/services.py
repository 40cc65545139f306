"""Study links and the workers who come through them (docs/CROWD.md).

A researcher makes a campaign's link for a recruiting platform; a worker who opens it with
the platform's parameters gets a password-less annotator account bound to that worker id
and campaign (`participant_enter`), reads the consent page if there is one, works, and
finishes with the campaign's completion code (or its screen-out code).

Invariants: one account per (campaign, platform, worker id), held by the unique constraint
on Participant; a link's participant count never passes its maximum, because new
participants are made under a row lock on the link."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from annotation.models import (
    Campaign,
    CampaignStatus,
    Participant,
    ParticipantState,
    Platform,
    ProjectRole,
    Screening,
    ScreeningPhase,
    StudyLink,
)
from annotation.services.projects import membership_set
from annotation.study import platforms
from flaskweb.security import rate_limit_exceeded

#: Campaign states in which a link lets workers in (a paused campaign resumes later).
OPEN_CAMPAIGN = {CampaignStatus.ACTIVE, CampaignStatus.PAUSED}
MAX_CODE = 100
MAX_CONSENT = 20_000


class StudyError(Exception):
    """A study link that cannot be used now. `code` names the case (bad_params, closed,
    full, not_found, rate_limited, conflict, state); `status` is the HTTP status of the page
    that explains it."""

    STATUS = {
        "bad_params": 400,
        "not_found": 404,
        "conflict": 409,
        "closed": 410,
        "full": 410,
        "rate_limited": 429,
        "state": 409,
    }

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = self.STATUS.get(code, 400)


# --- researchers: links and the campaign's study settings -------------------------------------


def study_link_create(
    *,
    campaign: Campaign,
    platform: str,
    completion_url: str = "",
    max_participants: int | None = None,
    created_by=None,
) -> StudyLink:
    """A new open link of the campaign for `platform`, with an unguessable token. Raises
    ValidationError for an unknown platform, a hostile completion URL or a maximum below 1."""
    if platform not in Platform.values:
        raise ValidationError({"platform": "unknown platform"})
    try:
        completion_url = platforms.completion_url_check(completion_url)
    except platforms.BadEntry as exc:
        raise ValidationError({"completion_url": str(exc)}) from None
    if max_participants is not None and max_participants < 1:
        raise ValidationError({"max_participants": "at least 1, or empty for no maximum"})
    for _ in range(5):  # 32 random bytes never collide in practice; the constraint decides
        link = StudyLink(
            campaign=campaign,
            platform=platform,
            token=secrets.token_urlsafe(32),
            completion_url=completion_url,
            max_participants=max_participants,
            created_by=created_by,
        )
        link.full_clean()
        try:
            with transaction.atomic():
                link.save()
        except IntegrityError:
            continue
        return link
    raise RuntimeError("could not draw a unique study link token")


def study_link_set_open(*, link: StudyLink, is_open: bool) -> StudyLink:
    """Close a link (workers get the "study closed" page; those inside keep working) or
    open it again. Idempotent."""
    StudyLink.objects.filter(pk=link.pk).update(is_open=is_open, updated_at=timezone.now())
    link.is_open = is_open
    return link


def study_settings_update(
    *, campaign: Campaign, consent_text: str, completion_code: str, screenout_code: str
) -> Campaign:
    """Set what a campaign's workers see: the consent text (empty: no consent page), the
    completion code and the screen-out code (empty: the completion code). Codes are
    printable text without spaces at the ends, at most 100 characters."""
    errors: dict[str, str] = {}
    values = {"completion_code": completion_code.strip(), "screenout_code": screenout_code.strip()}
    for name, value in values.items():
        if len(value) > MAX_CODE:
            errors[name] = f"at most {MAX_CODE} characters"
        elif any(not ch.isprintable() for ch in value):
            errors[name] = "printable characters only"
    consent_text = consent_text.strip()
    if len(consent_text) > MAX_CONSENT:
        errors["consent_text"] = f"at most {MAX_CONSENT} characters"
    if errors:
        raise ValidationError(errors)
    Campaign.objects.filter(pk=campaign.pk).update(
        consent_text=consent_text, updated_at=timezone.now(), **values
    )
    campaign.consent_text = consent_text
    campaign.completion_code = values["completion_code"]
    campaign.screenout_code = values["screenout_code"]
    return campaign


# --- workers: entering, consent, finishing ------------------------------------------------


def study_entry_throttle(*, address: str, link: StudyLink | None = None) -> None:
    """Count one use of a study link: from client address `address` (REMOTE_ADDR) when
    `link` is None, of `link` otherwise. Raises StudyError (rate_limited) past
    FLASKWEB_STUDY_ENTRIES_PER_ADDRESS per address or FLASKWEB_STUDY_ENTRIES_PER_LINK per
    link within FLASKWEB_STUDY_ENTRY_WINDOW seconds (the sign-in throttle's counters, in the
    shared cache; a refused visit stays counted)."""
    if link is None:
        key, limit = f"study-entry:addr:{address or 'unknown'}", "PER_ADDRESS"
    else:
        key, limit = f"study-entry:link:{link.pk}", "PER_LINK"
    if rate_limit_exceeded(
        key,
        limit=getattr(settings, f"FLASKWEB_STUDY_ENTRIES_{limit}"),
        window=settings.FLASKWEB_STUDY_ENTRY_WINDOW,
    ):
        raise StudyError(
            "This study link is being opened very often right now. Please wait a minute "
            "and open the link again.",
            code="rate_limited",
        )


def study_link_get_for_entry(*, token: str) -> StudyLink:
    """The link of a token, with its campaign; StudyError (not_found) otherwise."""
    link = (
        StudyLink.objects.select_related("campaign", "campaign__project")
        .filter(token=token[:64])
        .first()
    )
    if link is None:
        raise StudyError("There is no study at this address. Check the link.", code="not_found")
    return link


def _check_open(link: StudyLink) -> None:
    if not link.is_open or link.campaign.status not in OPEN_CAMPAIGN:
        raise StudyError(
            "This study is closed: it takes no more participants. Thank you for your interest.",
            code="closed",
        )


def participant_username(*, campaign_id: int, platform: str, worker_id: str, salt: str = "") -> str:
    """An account name that does not reveal the worker id: a keyed hash of the campaign,
    platform and id (the site's secret key), so it is stable and unguessable."""
    digest = salted_hmac(
        "annotation.study.username", f"{campaign_id}:{platform}:{worker_id}:{salt}"
    ).hexdigest()
    return f"p{campaign_id}-{digest[:16]}"


def _new_account(campaign: Campaign, platform: str, worker_id: str):
    User = get_user_model()
    for attempt in range(5):
        username = participant_username(
            campaign_id=campaign.pk,
            platform=platform,
            worker_id=worker_id,
            salt=str(attempt) if attempt else "",
        )
        if not User.objects.filter(username=username).exists():
            break
    else:
        raise RuntimeError("could not find a free participant user name")
    user = User(username=username)
    user.set_unusable_password()
    user.save()
    return user


def participant_enter(*, link: StudyLink, params: Mapping[str, str]) -> Participant:
    """Create or resume the participant of a visit to `link` with the platform's query
    parameters `params`.

    A new worker id gets a password-less annotator account (an unusable password: only
    the link signs it in), a project membership as annotator, a place in the campaign's
    pool and a Participant row (state "consent" when the campaign has a consent text,
    "working" otherwise). A known worker id resumes its account, even after the link
    closed (to finish, or fetch the code); the session ids (study, session, turkSubmitTo)
    of the latest visit are kept. Raises StudyError: bad_params; for new workers only,
    closed (link closed, campaign not running) and full (max_participants reached)."""
    try:
        entry = platforms.entry_parse(link.platform, params)
    except platforms.BadEntry as exc:
        raise StudyError(str(exc), code="bad_params") from None
    campaign = link.campaign
    with transaction.atomic():
        # The link's row lock serialises new participants: the maximum holds, and two
        # parallel first visits of one worker make one account.
        link = StudyLink.objects.select_for_update().select_related("campaign").get(pk=link.pk)
        campaign = link.campaign
        participant = (
            Participant.objects.select_related("user")
            .filter(campaign=campaign, platform=link.platform, worker_id=entry.worker_id)
            .first()
        )
        if participant is not None:  # admitted before: resumes even once the link closed
            return _resume(participant, entry)
        _check_open(link)
        full = link.max_participants is not None
        if full and link.participants.count() >= (link.max_participants or 0):
            raise StudyError(
                "This study has all the participants it needs. Thank you for your "
                "interest; please return it on your platform.",
                code="full",
            )
        user = _new_account(campaign, link.platform, entry.worker_id)
        membership_set(project=campaign.project, user=user, role=ProjectRole.ANNOTATOR)
        campaign.annotators.add(user)
        participant = Participant(
            link=link,
            campaign=campaign,
            user=user,
            platform=link.platform,
            worker_id=entry.worker_id,
            study_id=entry.study_id,
            session_id=entry.session_id,
            submit_to=entry.submit_to,
            state=ParticipantState.CONSENT if campaign.consent_text else ParticipantState.WORKING,
        )
        participant.full_clean(validate_unique=False)
        participant.save()
        return participant


def _resume(participant: Participant, entry: platforms.Entry) -> Participant:
    changes = {
        name: value
        for name in ("study_id", "session_id", "submit_to")
        if (value := getattr(entry, name)) and value != getattr(participant, name)
    }
    if changes:
        for name, value in changes.items():
            setattr(participant, name, value)
        participant.save(update_fields=[*changes, "updated_at"])
    return participant


def participant_consent(*, participant: Participant, agree: bool) -> Participant:
    """Record the answer on the consent page: agree → working (with the time), decline →
    declined (no code, no tasks). Only a participant still on the consent page may answer;
    answering again changes nothing."""
    now = timezone.now()
    if agree:
        Participant.objects.filter(pk=participant.pk, state=ParticipantState.CONSENT).update(
            state=ParticipantState.WORKING, consented_at=now, updated_at=now
        )
    else:
        Participant.objects.filter(pk=participant.pk, state=ParticipantState.CONSENT).update(
            state=ParticipantState.DECLINED, finished_at=now, updated_at=now
        )
        if participant.state == ParticipantState.CONSENT:
            participant.campaign.annotators.remove(participant.user_id)
    participant.refresh_from_db(fields=["state", "consented_at", "finished_at", "updated_at"])
    return participant


def participant_screened_out(*, participant: Participant) -> bool:
    """Whether the participant failed the campaign's qualification (annotation/screening/)."""
    return Screening.objects.filter(
        campaign_id=participant.campaign_id,
        annotator_id=participant.user_id,
        phase=ScreeningPhase.FAILED,
    ).exists()


def participant_finish(*, participant: Participant) -> Participant:
    """End a working participant's study: screened out if they failed the campaign's
    qualification, completed otherwise; their open leases are given back by expiry as
    usual. A participant who already finished keeps their state (idempotent). Raises
    StudyError (state) for one who has not consented or declined."""
    if participant.state in (ParticipantState.COMPLETED, ParticipantState.SCREENED_OUT):
        return participant
    if participant.state != ParticipantState.WORKING:
        raise StudyError("There is nothing to finish: you have not started.", code="state")
    screened_out = participant_screened_out(participant=participant)
    state = ParticipantState.SCREENED_OUT if screened_out else ParticipantState.COMPLETED
    now = timezone.now()
    Participant.objects.filter(pk=participant.pk, state=ParticipantState.WORKING).update(
        state=state, finished_at=now, updated_at=now
    )
    participant.refresh_from_db(fields=["state", "finished_at", "updated_at"])
    return participant


# --- the completion page ------------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    """What the completion page shows and where it sends the worker: `redirect_url` (meta
    refresh and a button) or an MTurk form posting to `submit_url`; neither when the link
    names no destination (the worker copies the code)."""

    code: str
    screened_out: bool
    redirect_url: str = ""
    submit_url: str = ""
    assignment_id: str = ""


def participant_completion(*, participant: Participant, link: StudyLink) -> Completion:
    """The code and destination of a finished participant (completed or screened out)."""
    campaign = participant.campaign
    screened_out = participant.state == ParticipantState.SCREENED_OUT
    code = (campaign.screenout_code if screened_out else "") or campaign.completion_code
    if link.platform == Platform.MTURK and not link.completion_url:
        submit = platforms.mturk_submit_url(
            participant.submit_to, allowed=settings.FLASKWEB_MTURK_SUBMIT_HOSTS
        )
        return Completion(
            code=code,
            screened_out=screened_out,
            submit_url=submit,
            assignment_id=participant.session_id if submit else "",
        )
    template = link.completion_url
    if not template and link.platform == Platform.PROLIFIC:
        template = platforms.PROLIFIC_COMPLETE
    url = ""
    if template:
        try:  # checked when saved; checked again in case the rules tightened since
            template = platforms.completion_url_check(template)
        except platforms.BadEntry:
            template = ""
        url = (
            platforms.completion_url_fill(template, code=code, worker_id=participant.worker_id)
            if template
            else ""
        )
    return Completion(code=code, screened_out=screened_out, redirect_url=url)
