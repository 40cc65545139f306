"""Reads of study links and participants: the researcher's study page and campaign summary,
and the participant of a study session. Worker ids are read here for the campaign's staff
only; nothing an annotator sees calls these but for their own row. (The platform ids of a
project's participants, for exports: annotation.selectors.participant_ids_for_project.)"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Exists, F, Q, QuerySet
from django.utils.translation import gettext, gettext_noop, ngettext

from annotation.models import (
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignStatus,
    Participant,
    ParticipantState,
    Screening,
    ScreeningPhase,
    StudyLink,
    TaskKind,
)
from annotation.selectors import open_normal_tasks
from annotation.study import platforms


def study_link_list(*, campaign: Campaign) -> list[StudyLink]:
    """The campaign's links, newest first, each with `participant_count`."""
    return list(
        StudyLink.objects.filter(campaign=campaign)
        .annotate(participant_count=Count("participants"))
        .order_by("-created_at", "-pk")
    )


def study_link_get_for_campaign(*, campaign: Campaign, link_id: int) -> StudyLink:
    return StudyLink.objects.get(campaign=campaign, pk=link_id)


def study_link_query_template(*, platform: str) -> str:
    """What a researcher appends to the link in the platform (its own placeholders)."""
    spec = platforms.PARAMS.get(platform)
    return spec.template if spec else ""


@dataclass(frozen=True)
class ParticipantRow:
    username: str
    platform: str
    worker_id: str
    study_id: str
    session_id: str
    state: str
    state_label: str
    link_id: int
    done: int
    consented_at: object
    finished_at: object
    created_at: object


#: The columns of a participant row, as participant_rows gives them.
PARTICIPANT_COLUMNS = (
    "user_id",
    "username",
    "platform",
    "worker_id",
    "study_id",
    "session_id",
    "state",
    "end_reason",
    "link_id",
    "tasks_done",
    "consented_at",
    "finished_at",
    "created_at",
)


def participant_rows(*, campaign: Campaign, state: str = "") -> QuerySet:
    """The campaign's participants, newest first, as dicts of PARTICIPANT_COLUMNS (their
    platform ids, state, link and submitted tasks), in one query; of one state if given."""
    done = Count(
        "user__assignments",
        filter=Q(
            user__assignments__campaign=campaign,
            user__assignments__status=AssignmentStatus.SUBMITTED,
        ),
    )
    rows = Participant.objects.filter(campaign=campaign)
    if state:
        rows = rows.filter(state=state)
    return (
        rows.annotate(username=F("user__username"), tasks_done=done)
        .order_by("-created_at", "-pk")
        .values(*PARTICIPANT_COLUMNS)
    )


def participant_list(*, campaign: Campaign, limit: int = 500) -> list[ParticipantRow]:
    """The campaign's newest participants (at most `limit`) for the study page."""
    labels = dict(ParticipantState.choices)
    return [
        ParticipantRow(
            username=r["username"],
            platform=r["platform"],
            worker_id=r["worker_id"],
            study_id=r["study_id"],
            session_id=r["session_id"],
            state=r["state"],
            state_label=labels.get(r["state"], r["state"]),
            link_id=r["link_id"],
            done=r["tasks_done"],
            consented_at=r["consented_at"],
            finished_at=r["finished_at"],
            created_at=r["created_at"],
        )
        for r in participant_rows(campaign=campaign)[:limit]
    ]


def study_summary(*, campaign: Campaign) -> dict[str, int]:
    """Counts for the campaign page: links (open of all) and participants by state (one
    query each)."""
    links = StudyLink.objects.filter(campaign=campaign).aggregate(
        links=Count("pk"), open_links=Count("pk", filter=Q(is_open=True))
    )
    states = dict(
        Participant.objects.filter(campaign=campaign)
        .values("state")
        .annotate(n=Count("pk"))
        .values_list("state", "n")
    )
    return {
        "links": links["links"],
        "open_links": links["open_links"],
        "participants": sum(states.values()),
        **{state: states.get(state, 0) for state in ParticipantState.values},
    }


def participant_for_session(*, participant_id: int, user) -> Participant | None:
    """The participant of a study session, if it is still the signed-in user's."""
    return (
        Participant.objects.select_related("campaign", "link")
        .filter(pk=participant_id, user_id=user.pk)
        .first()
    )


def participant_done_count(*, participant: Participant) -> int:
    return Assignment.objects.filter(
        campaign_id=participant.campaign_id,
        annotator_id=participant.user_id,
        status=AssignmentStatus.SUBMITTED,
    ).count()


# --- what a working participant must still do before the completion code -----------------------


@dataclass(frozen=True)
class WorkStatus:
    """Whether a working participant has done the study's required work (`due`: the
    completion code is theirs), and why or why not.

    `reason` is one of: "quota" (their quota is met), "no_task" (no task is left for them
    and they submitted at least one), "screening" (training or qualification not passed
    yet), "screened_out" (failed the qualification), "paused" (the campaign is paused, come
    back later), "working" (tasks are left and the quota, if any, is not met), "nothing"
    (no task was ever left for them: nothing to pay for, they return the study)."""

    due: bool
    reason: str
    done: int  # normal tasks submitted (what the quota counts: accepted assignments)
    quota: int | None

    @property
    def message(self) -> str:
        """The status in words, in the active language (plural forms by the number each
        sentence counts)."""
        done, quota = self.done, self.quota or 0
        counts = {"done": done, "quota": quota}
        if self.reason == "quota":
            text = ngettext(
                "You have done the %(quota)d task this study asks for.",
                "You have done the %(quota)d tasks this study asks for.",
                quota,
            )
        elif self.reason == "no_task":
            text = ngettext(
                "There are no tasks left for you; you did %(done)d task.",
                "There are no tasks left for you; you did %(done)d tasks.",
                done,
            )
        elif self.reason == "working":
            text = ngettext(
                "You have done %(done)d of the %(quota)d task this study asks for.",
                "You have done %(done)d of the %(quota)d tasks this study asks for.",
                quota,
            )
        elif self.reason == "working_no_quota":
            text = ngettext(
                "There are still tasks for you. You have done %(done)d task so far.",
                "There are still tasks for you. You have done %(done)d tasks so far.",
                done,
            )
        else:
            text = gettext(WORK_MESSAGES[self.reason])
        return text % counts


#: The reasons whose words count nothing (the counting ones are in WorkStatus.message);
#: marked for translation here, translated when shown.
WORK_MESSAGES = {
    "screening": gettext_noop("Finish the training and the qualification test first."),
    "screened_out": gettext_noop(
        "Your qualification test did not reach the mark this study needs."
    ),
    "paused": gettext_noop("The study is paused for now; please come back to it later."),
    "nothing": gettext_noop("There were no tasks left for you in this study."),
}


def participant_work_status(*, participant: Participant) -> WorkStatus:
    """What the participant of a working study session has done of the required work: the
    screening passed (when the campaign screens), then their quota met or no task left for
    them (the campaign finished, or nothing open and nothing held). Three to four queries."""
    campaign = Campaign.objects.only(
        "pk", "status", "screening", "quota_per_annotator", "route_by_domain"
    ).get(pk=participant.campaign_id)
    user_id = participant.user_id
    mine = Assignment.objects.filter(campaign_id=campaign.pk, annotator_id=user_id)
    counted = mine.accepted().count()  # what the quota counts (no_task_reason)
    quota = campaign.quota_per_annotator
    phase = (
        Screening.objects.filter(campaign_id=campaign.pk, annotator_id=user_id)
        .values_list("phase", flat=True)
        .first()
    )
    if phase == ScreeningPhase.FAILED:  # even if the campaign stopped screening since
        return WorkStatus(False, "screened_out", counted, quota)
    if campaign.screening and phase != ScreeningPhase.PASSED:
        return WorkStatus(False, "screening", counted, quota)
    if quota is not None and counted >= quota:
        return WorkStatus(True, "quota", counted, quota)
    if campaign.status == CampaignStatus.FINISHED:
        return WorkStatus(counted > 0, "no_task" if counted else "nothing", counted, quota)
    if campaign.status != CampaignStatus.ACTIVE:
        return WorkStatus(False, "paused", counted, quota)
    holding = mine.filter(
        status=AssignmentStatus.ACTIVE, kind=AssignmentKind.NORMAL, task__kind=TaskKind.NORMAL
    ).exists()
    left = holding or (
        Campaign.objects.filter(pk=campaign.pk)
        .filter(Exists(open_normal_tasks(user=participant.user)))
        .exists()
    )
    if left:
        return WorkStatus(False, "working" if quota else "working_no_quota", counted, quota)
    return WorkStatus(counted > 0, "no_task" if counted else "nothing", counted, quota)


# --- approving participants on their platform ------------------------------------------------

#: What the approval page suggests per participant (the researcher decides on the platform).
DECISIONS = {
    "approve": "Approve",
    "review": "Review before approving",
    "screened_out": "Screened out (screen-out code)",
    "return": "No code: should return the study",
    "working": "Still working",
}


@dataclass(frozen=True)
class ApprovalRow:
    """One participant as the researcher approves them: their platform ids and state, the
    work done and its quality figures (annotation/study/quality.py, None with too few), and
    the suggested decision with its reason."""

    worker_id: str
    platform: str
    study_id: str
    session_id: str
    username: str
    state: str
    state_label: str
    end_reason: str
    decision: str
    decision_reason: str
    tasks_done: int
    active_seconds: float
    median_seconds: float | None
    speed_ratio: float | None
    gold_correct: int
    gold_n: int
    attention_failed: int
    attention_n: int
    agreement: float | None
    agreement_n: int
    competence: float | None
    straightline_share: float | None
    scores_n: int
    flags: tuple[tuple[str, str], ...]
    consented_at: object
    finished_at: object

    @property
    def decision_label(self) -> str:
        return DECISIONS[self.decision]


def _decision(state: str, flags) -> tuple[str, str]:
    if state == ParticipantState.COMPLETED:
        if flags:
            return "review", "; ".join(reason for _, reason in flags)
        return "approve", "completed the required work; no quality flag"
    if state == ParticipantState.SCREENED_OUT:
        return "screened_out", "screened out (qualification or quality rules)"
    if state == ParticipantState.WORKING:
        return "working", "has not finished"
    return "return", "left before the required work, or declined consent: no code was shown"


def participant_approval_rows(*, campaign: Campaign, decision: str = "") -> list[ApprovalRow]:
    """Every participant of the campaign, oldest first, with their quality figures and the
    suggested decision (DECISIONS); of one decision if given. A handful of queries at any
    size (the participants, then campaign_quality's)."""
    from annotation.study import quality

    figures = quality.campaign_quality(campaign=campaign, rules=campaign.quality_rules)
    labels = dict(ParticipantState.choices)
    rows = []
    participants = (
        Participant.objects.filter(campaign=campaign)
        .order_by("created_at", "pk")
        .values_list(
            "user_id",
            "user__username",
            "worker_id",
            "platform",
            "study_id",
            "session_id",
            "state",
            "end_reason",
            "consented_at",
            "finished_at",
        )
    )
    for (
        user_id,
        username,
        worker,
        platform,
        study,
        session,
        state,
        end,
        consented,
        done,
    ) in participants:
        q = figures.get(user_id)
        flags = q.flags if q else ()
        verdict, why = _decision(state, flags)
        if decision and verdict != decision:
            continue
        rows.append(
            ApprovalRow(
                worker_id=worker,
                platform=platform,
                study_id=study,
                session_id=session,
                username=username,
                state=state,
                state_label=labels.get(state, state),
                end_reason=end,
                decision=verdict,
                decision_reason=why,
                tasks_done=q.tasks_done if q else 0,
                active_seconds=q.active_seconds if q else 0.0,
                median_seconds=q.median_seconds if q else None,
                speed_ratio=q.speed_ratio if q else None,
                gold_correct=q.gold_correct if q else 0,
                gold_n=q.gold_n if q else 0,
                attention_failed=q.attention_failed if q else 0,
                attention_n=q.attention_n if q else 0,
                agreement=q.agreement if q else None,
                agreement_n=q.agreement_n if q else 0,
                competence=q.competence if q else None,
                straightline_share=q.straightline_share if q else None,
                scores_n=q.scores_n if q else 0,
                flags=flags,
                consented_at=consented,
                finished_at=done,
            )
        )
    return rows


#: The approval CSV's columns: the platform's id first, so a column pastes into the
#: platform's bulk approve (Prolific: participant ids; MTurk: see APPROVAL_MTURK_COLUMNS).
APPROVAL_COLUMNS = (
    "worker_id",
    "platform",
    "study_id",
    "session_id",
    "state",
    "end_reason",
    "decision",
    "decision_reason",
    "tasks_done",
    "active_minutes",
    "median_seconds",
    "speed_ratio",
    "gold_correct",
    "gold_n",
    "attention_failed",
    "attention_n",
    "agreement",
    "agreement_n",
    "competence",
    "straightline_share",
    "scores_n",
    "flags",
    "consented_at",
    "finished_at",
)
#: MTurk's batch-results upload: approve with an "x", reject with a reason (left empty for
#: the researcher to decide on flagged assignments).
APPROVAL_MTURK_COLUMNS = ("AssignmentId", "WorkerId", "Approve", "Reject")


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def approval_csv_rows(rows: list[ApprovalRow], *, mturk: bool = False):
    """The rows of the approval CSV (a header first): APPROVAL_COLUMNS, or MTurk's upload
    format (approved assignments marked, the rest left for the researcher)."""
    if mturk:
        yield APPROVAL_MTURK_COLUMNS
        for r in rows:
            if r.session_id:
                yield (r.session_id, r.worker_id, "x" if r.decision == "approve" else "", "")
        return
    yield APPROVAL_COLUMNS
    for r in rows:
        values = {
            **{name: getattr(r, name, None) for name in APPROVAL_COLUMNS},
            "active_minutes": round(r.active_seconds / 60, 2),
            "flags": " | ".join(code for code, _ in r.flags),
        }
        yield tuple(_fmt(values[name]) for name in APPROVAL_COLUMNS)


def participant_rows_with_quality(*, campaign: Campaign, rows: list[dict]) -> list[dict]:
    """`rows` (of participant_rows) with each participant's quality figures, flags and the
    suggested decision added (the API's page of participants)."""
    from annotation.study import quality

    figures = quality.campaign_quality(campaign=campaign, rules=campaign.quality_rules)
    out = []
    for row in rows:
        q = figures.get(row["user_id"])
        flags = q.flags if q else ()
        decision, reason = _decision(row["state"], flags)
        out.append(
            {
                **row,
                "decision": decision,
                "decision_reason": reason,
                "active_seconds": q.active_seconds if q else 0.0,
                "median_seconds": q.median_seconds if q else None,
                "speed_ratio": q.speed_ratio if q else None,
                "gold_correct": q.gold_correct if q else 0,
                "gold_n": q.gold_n if q else 0,
                "attention_failed": q.attention_failed if q else 0,
                "attention_n": q.attention_n if q else 0,
                "agreement": q.agreement if q else None,
                "agreement_n": q.agreement_n if q else 0,
                "competence": q.competence if q else None,
                "straightline_share": q.straightline_share if q else None,
                "scores_n": q.scores_n if q else 0,
                "flags": [{"code": code, "reason": why} for code, why in flags],
            }
        )
    return out
