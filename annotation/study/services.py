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
from django.utils.crypto import constant_time_compare, salted_hmac
from django.utils.translation import gettext

from annotation.models import (
    Campaign,
    CampaignStatus,
    Participant,
    ParticipantState,
    Platform,
    ProjectRole,
    StudyLink,
)
from annotation.services.projects import membership_set
from annotation.study import platforms
from annotation.study import selectors as ss
from flaskweb.security import rate_limit_exceeded

#: Campaign states in which a link lets workers in (a paused campaign resumes later).
OPEN_CAMPAIGN = {CampaignStatus.ACTIVE, CampaignStatus.PAUSED}
MAX_CODE = 100
MAX_CONSENT = 20_000


def entry_message(exc: platforms.BadEntry) -> str:
    """A refused entry's message in the page's language (platforms marks the English)."""
    text = gettext(exc.template)
    return text % exc.params if exc.params else text


class StudyError(Exception):
    """A study link that cannot be used now. `code` names the case (bad_params, closed,
    full, not_found, rate_limited, conflict, state, resume_needed, bad_code, not_due);
    `status` is the HTTP status of the page that explains it."""

    STATUS = {
        "bad_params": 400,
        "not_found": 404,
        "conflict": 409,
        "closed": 410,
        "full": 410,
        "rate_limited": 429,
        "state": 409,
        "resume_needed": 403,
        "bad_code": 400,
        "not_due": 409,
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


def quality_rules_update(*, campaign: Campaign, rules: Mapping, screen_out: bool) -> Campaign:
    """Set the campaign's quality rules (annotation/study/quality.py: checked, merged over
    the defaults; None turns a rule off) and whether breaking one screens a participant out
    when they finish. Raises ValidationError keyed by the rule's name."""
    from annotation.study import quality

    cleaned = quality.quality_rules_clean(rules)
    Campaign.objects.filter(pk=campaign.pk).update(
        quality_rules=cleaned, quality_screen_out=screen_out, updated_at=timezone.now()
    )
    campaign.quality_rules = cleaned
    campaign.quality_screen_out = screen_out
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
            gettext(
                "This study link is being opened very often right now. Please wait a minute "
                "and open the link again."
            ),
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
        raise StudyError(
            gettext("There is no study at this address. Check the link."), code="not_found"
        )
    return link


def _check_open(link: StudyLink) -> None:
    if not link.is_open or link.campaign.status not in OPEN_CAMPAIGN:
        raise StudyError(
            gettext(
                "This study is closed: it takes no more participants. Thank you for your interest."
            ),
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


RESUME_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read aloud, typed back
RESUME_LENGTH = 12  # 31**12: about 59 bits, with attempts throttled per participant


def resume_code_new() -> str:
    """A fresh resume code, shown grouped by four (ABCD-EFGH-JKMN)."""
    raw = "".join(secrets.choice(RESUME_ALPHABET) for _ in range(RESUME_LENGTH))
    return "-".join(raw[i : i + 4] for i in range(0, RESUME_LENGTH, 4))


def resume_code_format(code: str) -> str:
    """A typed resume code as shown: capitals, grouped by four."""
    raw = "".join(ch for ch in code.upper() if ch.isalnum())
    return "-".join(raw[i : i + 4] for i in range(0, len(raw), 4))


def _resume_hash(*, campaign_id: int, platform: str, worker_id: str, code: str) -> str:
    normal = "".join(ch for ch in code.upper() if ch.isalnum())
    return salted_hmac(
        "annotation.study.resume",
        f"{campaign_id}:{platform}:{worker_id}:{normal}",
        algorithm="sha256",
    ).hexdigest()


@dataclass(frozen=True)
class Admission:
    """The outcome of a visit to a study link: the participant, and their resume code when
    it was drawn in this visit (a new participant; shown to them, stored only hashed)."""

    participant: Participant
    resume_code: str = ""


def participant_enter(
    *, link: StudyLink, params: Mapping[str, str], proven_ids: frozenset[int] = frozenset()
) -> Admission:
    """Create or resume the participant of a visit to `link` with the platform's query
    parameters `params`.

    A new worker id gets a password-less annotator account (an unusable password: only
    the link signs it in), a project membership as annotator, a place in the campaign's
    pool, a Participant row (state "consent" when the campaign has a consent text,
    "working" otherwise) and a resume code (returned once, kept as a keyed hash).

    A known worker id is only resumed when the visit is proven to be theirs: its id is in
    `proven_ids` (the browser that started holds the signed study cookie, or the session is
    already theirs): then
    even after the link closed, and the visit's session ids (study, session, turkSubmitTo)
    replace the saved ones. An unproven visit of a known worker id raises StudyError
    (resume_needed): it must give the resume code (participant_resume_with_code), and it
    changes nothing. Participants admitted before resume codes existed (no hash) resume
    unproven, but such a visit never changes their saved ids.

    Raises StudyError: bad_params; resume_needed; for new workers only, closed (link
    closed, campaign not running) and full (max_participants reached)."""
    try:
        entry = platforms.entry_parse(link.platform, params)
    except platforms.BadEntry as exc:
        raise StudyError(entry_message(exc), code="bad_params") from None
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
            if participant.pk in proven_ids:
                return Admission(_resume(participant, entry))
            if participant.resume_code_hash:
                raise StudyError(
                    gettext(
                        "This study was started in another browser. To continue here, enter "
                        "the resume code you were shown when you started."
                    ),
                    code="resume_needed",
                )
            return Admission(participant)  # admitted before resume codes: ids unchanged
        _check_open(link)
        full = link.max_participants is not None
        if full and link.participants.count() >= (link.max_participants or 0):
            raise StudyError(
                gettext(
                    "This study has all the participants it needs. Thank you for your "
                    "interest; please return it on your platform."
                ),
                code="full",
            )
        user = _new_account(campaign, link.platform, entry.worker_id)
        membership_set(project=campaign.project, user=user, role=ProjectRole.ANNOTATOR)
        campaign.annotators.add(user)
        code = resume_code_new()
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
            resume_code_hash=_resume_hash(
                campaign_id=campaign.pk,
                platform=link.platform,
                worker_id=entry.worker_id,
                code=code,
            ),
        )
        participant.full_clean(validate_unique=False)
        participant.save()
        return Admission(participant, resume_code=code)


def participant_resume_with_code(
    *, link: StudyLink, params: Mapping[str, str], code: str, address: str
) -> Participant:
    """Resume a known worker id on a new device with the resume code they were shown: the
    code proves the visit is theirs, so the visit's session ids replace the saved ones (an
    MTurk worker who accepted the HIT again). Attempts are throttled per participant and
    per client address (FLASKWEB_STUDY_RESUME_ATTEMPTS per FLASKWEB_STUDY_RESUME_WINDOW
    seconds; a refused attempt stays counted). Raises StudyError: bad_params, not_found
    (no such worker in this study), rate_limited, bad_code."""
    try:
        entry = platforms.entry_parse(link.platform, params)
    except platforms.BadEntry as exc:
        raise StudyError(entry_message(exc), code="bad_params") from None
    participant = (
        Participant.objects.select_related("user", "campaign")
        .filter(campaign_id=link.campaign_id, platform=link.platform, worker_id=entry.worker_id)
        .first()
    )
    limit = settings.FLASKWEB_STUDY_RESUME_ATTEMPTS
    window = settings.FLASKWEB_STUDY_RESUME_WINDOW
    keys = [f"study-resume:addr:{address or 'unknown'}"]
    if participant is not None:
        keys.append(f"study-resume:participant:{participant.pk}")
    if any(rate_limit_exceeded(key, limit=limit, window=window) for key in keys):
        raise StudyError(
            gettext(
                "Too many resume codes were tried. Please wait an hour and try again, or "
                "contact the researcher through your platform."
            ),
            code="rate_limited",
        )
    if participant is None:
        raise StudyError(gettext("There is no study in progress for this id."), code="not_found")
    given = _resume_hash(
        campaign_id=participant.campaign_id,
        platform=participant.platform,
        worker_id=participant.worker_id,
        code=code,
    )
    if not participant.resume_code_hash or not constant_time_compare(
        given, participant.resume_code_hash
    ):
        raise StudyError(
            gettext("That is not the resume code of this study. Check it and try again."),
            code="bad_code",
        )
    with transaction.atomic():
        locked = (
            Participant.objects.select_for_update().select_related("user").get(pk=participant.pk)
        )
        return _resume(locked, entry)


def _resume(participant: Participant, entry: platforms.Entry) -> Participant:
    """A proven visit's session ids (study, session, turkSubmitTo) replace the saved ones."""
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
            state=ParticipantState.DECLINED, end_reason="declined", finished_at=now, updated_at=now
        )
        if participant.state == ParticipantState.CONSENT:
            participant.campaign.annotators.remove(participant.user_id)
    participant.refresh_from_db(fields=["state", "consented_at", "finished_at", "updated_at"])
    return participant


#: Why a study ended for a participant (Participant.end_reason).
END_REASONS = {
    "quota": "quota met",
    "no_task": "no task left",
    "qualification": "failed the qualification",
    "quality": "quality rules",
    "left": "left early",
    "declined": "declined consent",
}


def participant_finish(*, participant: Participant, leave: bool = False) -> Participant:
    """End a working participant's study.

    Completed (the completion code) only when the required work is done
    (selectors.participant_work_status: screening passed where the campaign screens, and
    the quota met or no task left for them) — unless the campaign screens out by its
    quality rules and the participant's figures break one (annotation/study/quality.py):
    then screened out, as after a failed qualification. A participant who has not done the
    work is refused (StudyError not_due, nothing changes) unless `leave` says they stop
    anyway: then "left", with no completion code. A participant who already finished keeps
    their state (idempotent). Raises StudyError (state) for one who has not consented or
    declined."""
    if participant.state in FINISHED:
        return participant
    if participant.state != ParticipantState.WORKING:
        raise StudyError(gettext("There is nothing to finish: you have not started."), code="state")
    status = ss.participant_work_status(participant=participant)
    if status.reason == "screened_out":
        state, reason = ParticipantState.SCREENED_OUT, "qualification"
    elif status.due:
        state, reason = ParticipantState.COMPLETED, status.reason
        if _quality_breaks_rules(participant):
            state, reason = ParticipantState.SCREENED_OUT, "quality"
    elif leave:
        state, reason = ParticipantState.LEFT, "left"
    else:
        raise StudyError(status.message, code="not_due")
    now = timezone.now()
    Participant.objects.filter(pk=participant.pk, state=ParticipantState.WORKING).update(
        state=state, end_reason=reason, finished_at=now, updated_at=now
    )
    participant.refresh_from_db(fields=["state", "end_reason", "finished_at", "updated_at"])
    return participant


#: The states in which a participant's study is over.
FINISHED = (
    ParticipantState.COMPLETED,
    ParticipantState.SCREENED_OUT,
    ParticipantState.LEFT,
    ParticipantState.DECLINED,
)


def _quality_breaks_rules(participant: Participant) -> bool:
    campaign = participant.campaign
    if not campaign.quality_screen_out:
        return False
    from annotation.study import quality

    figures = quality.campaign_quality(campaign=campaign, rules=campaign.quality_rules)
    mine = figures.get(participant.user_id)
    return bool(mine and mine.flags)


# --- the completion page ------------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    """What the completion page shows and where it sends the worker: `redirect_url` (meta
    refresh and a button) or an MTurk form posting to `submit_url`; neither when the link
    names no destination (the worker copies the code). `returned`: no code at all (left
    early, or screened out in a campaign without a screen-out code): the page asks the
    participant to return the study on their platform."""

    code: str
    screened_out: bool
    redirect_url: str = ""
    submit_url: str = ""
    assignment_id: str = ""
    returned: bool = False
    left: bool = False


def participant_completion(*, participant: Participant, link: StudyLink) -> Completion:
    """The code and destination of a finished participant: the completion code only when
    completed; the screen-out code when screened out; no code (return the study) when they
    left early or the campaign has no screen-out code. The completion code never stands in
    for another."""
    campaign = participant.campaign
    screened_out = participant.state == ParticipantState.SCREENED_OUT
    if participant.state == ParticipantState.COMPLETED:
        code = campaign.completion_code
    elif screened_out:
        code = campaign.screenout_code
    else:
        code = ""
    if not code and participant.state != ParticipantState.COMPLETED:
        return Completion(
            code="",
            screened_out=screened_out,
            returned=True,
            left=participant.state == ParticipantState.LEFT,
        )
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
