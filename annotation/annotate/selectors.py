"""Reads for the annotator's own pages: the dashboard, the scoring card, gold feedback.

Blindness is a property of these reads, not only of the templates: nothing returned here
carries a model name, a judge score, another annotator's score, or (outside the feedback
that a campaign explicitly enables) whether a task is gold, an attention check or a repeat.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    Case,
    Count,
    Exists,
    Expression,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    When,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.access import campaign_pool_for_user
from annotation.models import (
    AnnotatorExpertise,
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignStatus,
    GoldScore,
    HumanScore,
    Item,
    ItemDomain,
    Response,
    Task,
    TaskKind,
    accepted_assignment_q,
)
from annotation.selectors import TaskSkill, item_skills_sql, skills_for_item
from flaskweb.db import aware, fetch_one, instance_from

VISIBLE_STATUSES = (CampaignStatus.ACTIVE, CampaignStatus.PAUSED)


@dataclass(frozen=True)
class TaskCard:
    """What the annotator is shown for an assignment: no model name, task kind or other
    people's scores."""

    assignment_id: int
    expires_at: datetime
    instruction: str
    reference: str | None  # None when the campaign hides references
    response: str
    skills: list[TaskSkill]  # ranked


_CARD = f"""
SELECT a.expires_at, c.id, c.updated_at, c.skill_mode, c.show_reference,
       r.item_id, r.text, i.instruction, i.reference_answer, {{skills}}
FROM {Assignment._meta.db_table} a
JOIN {Campaign._meta.db_table} c ON c.id = a.campaign_id
JOIN {Task._meta.db_table} t ON t.id = a.task_id
JOIN {Response._meta.db_table} r ON r.id = t.response_id
JOIN {Item._meta.db_table} i ON i.id = r.item_id
WHERE a.id = %s AND a.annotator_id = %s
"""


def task_card_for_annotator(*, user, assignment_id: int) -> TaskCard | None:
    """The user's own assignment as a card; None for anyone else's. One raw statement on
    PostgreSQL (two on SQLite) once the campaign's pinned rubrics are cached."""
    sql = _CARD.format(skills=item_skills_sql("r.item_id"))
    row = fetch_one(sql, [assignment_id, user.pk])
    if row is None:
        return None
    expires_at, campaign_id, updated_at, skill_mode, show_reference = row[:5]
    item_id, text, instruction, reference, item_skills = row[5:]
    campaign = instance_from(
        Campaign, {"id": campaign_id, "updated_at": aware(updated_at), "skill_mode": skill_mode}
    )
    return TaskCard(
        assignment_id=assignment_id,
        expires_at=aware(expires_at),
        instruction=instruction,
        reference=reference if show_reference else None,
        response=text,
        skills=skills_for_item(item_id=item_id, campaign=campaign, item_skills=item_skills),
    )


@dataclass(frozen=True)
class AnnotatorCampaignRow:
    id: int
    name: str
    project_name: str
    status: str
    status_label: str
    done: int  # every task this annotator submitted here, whatever its (hidden) kind
    quota: int | None
    available: int  # tasks this annotator could still be given now (normal ones)
    has_open_task: bool

    @property
    def can_start(self) -> bool:
        return self.has_open_task or (self.status == CampaignStatus.ACTIVE and self.available > 0)


def campaign_list_for_annotator(*, user) -> list[AnnotatorCampaignRow]:
    """The user's active and paused campaigns with their own progress, in two queries.

    `done` counts every submitted task, gold and repeats included: counting only the ones
    that fill the quota would let an annotator tell afterwards which tasks were gold.
    """
    never_mine = ~Exists(
        Assignment.objects.filter(
            task_id=OuterRef("pk"), annotator=user, kind=AssignmentKind.NORMAL
        )
    )
    open_tasks = Task.objects.filter(
        campaign_id=OuterRef("pk"), kind=TaskKind.NORMAL, assigned__lt=F("overlap")
    ).filter(never_mine)
    available: Expression = _count(open_tasks)
    domains = list(AnnotatorExpertise.objects.filter(user=user).values_list("domain_id", flat=True))
    if domains:
        routed = open_tasks.filter(
            Exists(
                ItemDomain.objects.filter(
                    item_id=OuterRef("response__item_id"), domain_id__in=domains
                )
            )
        )
        available = Case(
            When(route_by_domain=True, then=_count(routed)),
            default=available,
            output_field=IntegerField(),
        )
    campaigns = (
        campaign_pool_for_user(user=user)
        .filter(status__in=VISIBLE_STATUSES)
        .select_related("project")
        .annotate(
            n_done=Count(
                "assignments",
                filter=Q(
                    assignments__annotator=user,
                    assignments__status=AssignmentStatus.SUBMITTED,
                ),
            ),
            n_quota_done=Count(
                "assignments",
                filter=Q(assignments__annotator=user) & accepted_assignment_q(path="assignments__"),
            ),
            n_available=available,
            has_open=Exists(
                Assignment.objects.filter(
                    campaign_id=OuterRef("pk"),
                    annotator=user,
                    status=AssignmentStatus.ACTIVE,
                    expires_at__gt=timezone.now(),
                )
            ),
        )
        .order_by("status", "name")  # active before paused
    )
    rows = []
    for c in campaigns:
        left = c.n_available
        if c.quota_per_annotator is not None:
            left = max(0, min(left, c.quota_per_annotator - c.n_quota_done))
        rows.append(
            AnnotatorCampaignRow(
                id=c.pk,
                name=c.name,
                project_name=c.project.name,
                status=c.status,
                status_label=c.get_status_display(),
                done=c.n_done,
                quota=c.quota_per_annotator,
                available=left,
                has_open_task=c.has_open,
            )
        )
    return rows


def _count(queryset: QuerySet) -> Coalesce:
    counted = queryset.order_by().values("campaign_id").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


# --- the scoring card ------------------------------------------------------------------------


def assignment_get_for_annotator(*, user, assignment_id: int) -> Assignment:
    """The user's own assignment, pre-joined for the card; raises Assignment.DoesNotExist
    for anyone else's."""
    return Assignment.objects.select_related("campaign", "task__response__item").get(
        pk=assignment_id, annotator=user
    )


def assignment_done_count(*, campaign: Campaign, user) -> int:
    return Assignment.objects.filter(
        campaign=campaign, annotator=user, status=AssignmentStatus.SUBMITTED
    ).count()


#: Why a claim came back empty: the code the API sends (the No-Task-Reason header, a chained
#: submit's `next_reason`) -> the words the annotate page shows.
NO_TASK_MESSAGES = {
    "campaign_draft": "This campaign has not started yet.",
    "campaign_paused": "This campaign is paused for now. Please come back later.",
    "campaign_finished": "This campaign is finished. Thank you for your work!",
    "quota_reached": "You have reached your quota for this campaign. Thank you!",
    "no_task_available": (
        "There is nothing for you to score right now: every response has enough "
        "annotators, or you have scored all the ones you can. Thank you!"
    ),
}


def no_task_reason(*, campaign: Campaign, user) -> str:
    """Why `user` has no task in `campaign` now, as a key of NO_TASK_MESSAGES: the campaign
    is not active (draft, paused, finished), the user's quota is met (their accepted
    assignments, Assignment.objects.accepted), or nothing is left for them. Ask it right
    after an empty claim. It re-reads the campaign's status and quota into `campaign` (two
    fields, one query): the caller may hold a stub (the API) or an instance read before the
    claim, and the reason must be the campaign's state now."""
    campaign.refresh_from_db(fields=["status", "quota_per_annotator"])
    if campaign.status != CampaignStatus.ACTIVE:
        return f"campaign_{campaign.status}"
    if campaign.quota_per_annotator is not None:
        counted = Assignment.objects.filter(campaign=campaign, annotator=user).accepted().count()
        if counted >= campaign.quota_per_annotator:
            return "quota_reached"
    return "no_task_available"


# --- gold feedback (only when the campaign enables it) ---------------------------------------


@dataclass(frozen=True)
class GoldFeedbackRow:
    skill_name: str
    given: str  # "1".."5" or "N/A"
    known: str
    tolerance: int
    agrees: bool


@dataclass(frozen=True)
class GoldFeedback:
    rows: list[GoldFeedbackRow]
    explanations: list[str]

    @property
    def all_agree(self) -> bool:
        return all(r.agrees for r in self.rows)


def gold_feedback_for_assignment(*, assignment: Assignment) -> GoldFeedback | None:
    """The known scores next to the annotator's own, for a submitted gold or attention
    task; None for any other task (the caller never learns more than that)."""
    if assignment.task.kind not in (TaskKind.GOLD, TaskKind.ATTENTION):
        return None
    if assignment.kind != AssignmentKind.NORMAL:
        return None
    known = {
        g.skill_id: g
        for g in GoldScore.objects.filter(task_id=assignment.task_id)
        .select_related("skill")
        .order_by("skill__order", "skill__name")
    }
    given = {
        s.skill_id: s
        for s in HumanScore.objects.filter(assignment_id=assignment.pk).select_related("skill")
    }
    rows = []
    explanations: list[str] = []
    for skill_id, gold in known.items():
        if gold.explanation and gold.explanation not in explanations:
            explanations.append(gold.explanation)
        mine = given.get(skill_id)
        if mine is None:
            continue  # a known score for a skill this task did not ask
        rows.append(
            GoldFeedbackRow(
                skill_name=gold.skill.name,
                given="N/A" if mine.is_na else str(mine.score),
                known="N/A" if gold.is_na else str(gold.score),
                tolerance=gold.tolerance,
                agrees=_agrees(mine, gold),
            )
        )
    return GoldFeedback(rows=rows, explanations=explanations)


def _agrees(mine: HumanScore, gold: GoldScore) -> bool:
    if mine.is_na or gold.is_na:
        return mine.is_na == gold.is_na
    # the check constraints: a score that is not N/A has a value
    assert mine.score is not None and gold.score is not None
    return abs(mine.score - gold.score) <= gold.tolerance
