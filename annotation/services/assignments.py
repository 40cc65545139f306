"""The annotator workflow: claim the next task, submit scores, skip, flag, edit, expire.

See annotation/ASSIGNMENT.md for the selection policy and annotation/locks.py for the lock
order. Every function here is one short transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import BooleanField, Exists, ExpressionWrapper, F, OuterRef, Q
from django.utils import timezone

from annotation import locks
from annotation.models import (
    AnnotatorExpertise,
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignStatus,
    HumanScore,
    HumanScoreRevision,
    ItemDomain,
    Task,
    TaskKind,
)
from annotation.selectors import TaskSkill, task_skills

MAX_RATIONALE = 2000
REPEAT_MIN_GAP = 5


class AssignmentError(Exception):
    """A request the workflow refuses, with a message for the annotator."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


# --- pool ---------------------------------------------------------------------------------------


def campaign_has_annotator(*, campaign: Campaign, user) -> bool:
    return Campaign.objects.filter(pk=campaign.pk).filter(_in_pool(user)).exists()


def _in_pool(user) -> Q:
    """The campaign's pool holds `user`, directly or through a group (one query, no joins
    that could duplicate campaign rows)."""
    direct = Campaign.annotators.through.objects.filter(campaign_id=OuterRef("pk"), user_id=user.pk)
    via_group = Campaign.groups.through.objects.filter(
        campaign_id=OuterRef("pk"), group__user=user.pk
    )
    return Q(Exists(direct)) | Q(Exists(via_group))


# --- claim ----------------------------------------------------------------------------------------


@transaction.atomic
def assignment_claim_next(*, campaign: Campaign, annotator) -> Assignment | None:
    """The annotator's current or next task as an active lease; None when there is none.

    Policy: annotation/ASSIGNMENT.md. Concurrency: the normal-task pick locks one Task row
    with SKIP LOCKED; the slot and the lease are written in the same transaction.
    """
    now = timezone.now()
    if connection.vendor == "postgresql":
        # One claim at a time per (campaign, annotator): two tabs claiming at the same
        # instant would both miss the resume check below and race for the same task.
        # (SQLite serialises whole write transactions already.)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, %s)",
                [_int32(campaign.pk), _int32(annotator.pk)],
            )
    current = (
        Assignment.objects.filter(
            campaign=campaign,
            annotator=annotator,
            status=AssignmentStatus.ACTIVE,
            expires_at__gt=now,
        )
        .order_by("pk")
        .first()
    )
    if current is not None:
        return current
    # Re-read (status may have changed) together with the pool check: one statement.
    campaign = Campaign.objects.annotate(
        in_pool=ExpressionWrapper(_in_pool(annotator), output_field=BooleanField())
    ).get(pk=campaign.pk)
    if campaign.status != CampaignStatus.ACTIVE or not campaign.in_pool:
        return None
    mine = Assignment.objects.filter(campaign=campaign, annotator=annotator)
    if campaign.quota_per_annotator is not None:
        done = mine.filter(
            task__kind=TaskKind.NORMAL,
            kind=AssignmentKind.NORMAL,
            status=AssignmentStatus.SUBMITTED,
        ).count()
        if done >= campaign.quota_per_annotator:
            return None
    lease = now + timedelta(seconds=campaign.lease_seconds)
    # Counted only when a rate needs it: most campaigns have neither gold nor repeats.
    served = mine.count() if campaign.gold_rate > 0 or campaign.repeat_rate > 0 else 0
    if _every(campaign.gold_rate, served):
        gold = _claim_gold(campaign, annotator, lease)
        if gold is not None:
            return gold
    if _every(campaign.repeat_rate, served):
        repeat = _claim_repeat(campaign, annotator, lease)
        if repeat is not None:
            return repeat
    return _claim_normal(campaign, annotator, lease)


def _int32(value: int) -> int:
    """Fold an id into the int4 key space of pg_advisory_xact_lock(int, int)."""
    return (value % 2**32) - 2**31


def _every(rate: float, served: int) -> bool:
    """True for every round(1/rate)-th task (deterministic, so testable and fair)."""
    if rate <= 0:
        return False
    period = max(2, round(1 / rate))
    return served % period == period - 1


def _not_mine(annotator, kind: str = AssignmentKind.NORMAL):
    return ~Exists(Assignment.objects.filter(task=OuterRef("pk"), annotator=annotator, kind=kind))


def _claim_normal(campaign: Campaign, annotator, lease) -> Assignment | None:
    # `assigned < campaign.overlap` repeats `assigned < overlap` (a task's overlap is the
    # campaign's, fixed at activation) so that the scan of the task_claim_order index starts
    # below K instead of walking every complete task first: with 9,000 of 10,000 tasks
    # complete, 0.64 ms -> 0.015 ms per claim, and the gap grows with the campaign.
    open_tasks = Task.objects.filter(
        campaign=campaign,
        kind=TaskKind.NORMAL,
        assigned__lt=F("overlap"),
    ).filter(_not_mine(annotator), assigned__lt=campaign.overlap)
    if campaign.route_by_domain:
        domains = AnnotatorExpertise.objects.filter(user=annotator).values("domain_id")
        if domains.exists():
            open_tasks = open_tasks.filter(
                Exists(
                    ItemDomain.objects.filter(
                        item_id=OuterRef("response__item_id"), domain_id__in=domains
                    )
                )
            )
    task = locks.open_tasks_skip_locked(open_tasks).order_by("-assigned", "pk").only("pk").first()
    if task is None:
        return None
    Task.objects.filter(pk=task.pk).update(assigned=F("assigned") + 1)
    return Assignment.objects.create(
        task_id=task.pk, campaign=campaign, annotator=annotator, expires_at=lease
    )


def _claim_gold(campaign: Campaign, annotator, lease) -> Assignment | None:
    task = (
        Task.objects.filter(campaign=campaign, kind__in=[TaskKind.GOLD, TaskKind.ATTENTION])
        .filter(_not_mine(annotator))
        .order_by("pk")
        .first()
    )
    if task is None:
        return None
    return Assignment.objects.create(
        task=task, campaign=campaign, annotator=annotator, expires_at=lease
    )


def _claim_repeat(campaign: Campaign, annotator, lease) -> Assignment | None:
    submitted = list(
        Assignment.objects.filter(
            campaign=campaign,
            annotator=annotator,
            kind=AssignmentKind.NORMAL,
            status=AssignmentStatus.SUBMITTED,
            task__kind=TaskKind.NORMAL,
        )
        .order_by("submitted_at", "pk")
        .values_list("task_id", flat=True)
    )
    if len(submitted) <= REPEAT_MIN_GAP:
        return None
    repeated = set(
        Assignment.objects.filter(
            campaign=campaign, annotator=annotator, kind=AssignmentKind.REPEAT
        ).values_list("task_id", flat=True)
    )
    for task_id in submitted[:-REPEAT_MIN_GAP]:
        if task_id not in repeated:
            return Assignment.objects.create(
                task_id=task_id,
                campaign=campaign,
                annotator=annotator,
                kind=AssignmentKind.REPEAT,
                expires_at=lease,
            )
    return None


#: Claims free their campaign's lapsed leases at most this often per process (beat does it
#: every minute regardless): one SELECT per claim cost ~5% of the claim at 200 claims/s.
EXPIRE_ON_CLAIM_EVERY = timedelta(seconds=2)
_last_expiry_check: dict[int, object] = {}


def assignment_next(*, campaign: Campaign, annotator) -> Assignment | None:
    """What the annotator should do now: frees this campaign's lapsed leases first (so a
    slot abandoned minutes ago is offered again without waiting for beat), then claims."""
    now = timezone.now()
    last = _last_expiry_check.get(campaign.pk)
    if last is None or now - last >= EXPIRE_ON_CLAIM_EVERY or now < last:
        _last_expiry_check[campaign.pk] = now
        assignments_expire_stale(campaign_id=campaign.pk, limit=50)
    return assignment_claim_next(campaign=campaign, annotator=annotator)


# --- what a task asks for: a read, in annotation.selectors --------------------------------------

# --- submit ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreInput:
    skill_id: int
    score: int | None  # None = N/A
    rationale: str = ""
    time_ms: int | None = None


@dataclass(frozen=True)
class SubmitResult:
    assignment: Assignment
    created: bool  # False when this was a repeated submission of the same assignment
    late: bool = False


@transaction.atomic(durable=True)
def human_score_submit(
    *,
    assignment_id: int,
    annotator,
    scores: list[ScoreInput],
    active_ms: int | None = None,
) -> SubmitResult:
    """Record an annotator's scores for one assignment; exactly one score per asked skill.

    Idempotent: a second submission of the same assignment changes nothing and returns
    created=False. A late submission on an expired lease is accepted only while the task
    still has a free slot. Raises AssignmentError with a clear message otherwise.
    """
    try:
        assignment = locks.assignment_lock(assignment_id=assignment_id)
    except Assignment.DoesNotExist:
        raise AssignmentError("no such task", code="not_found") from None
    if assignment.annotator_id != annotator.pk:
        raise AssignmentError("no such task", code="not_found")
    if assignment.status == AssignmentStatus.SUBMITTED:
        return SubmitResult(assignment, created=False)
    if assignment.status == AssignmentStatus.SKIPPED:
        raise AssignmentError("this task was skipped; it cannot be submitted", code="skipped")
    # Lock order: the assignment (above), then its task. Locked before the skills are read
    # so the task row is fetched once.
    task = locks.task_lock(task_id=assignment.task_id)
    assignment.task = task
    asked = task_skills(assignment=assignment)
    rows = _validate_scores(asked, scores)
    now = timezone.now()
    late = assignment.status == AssignmentStatus.EXPIRED or assignment.expires_at <= now
    counts = task.kind == TaskKind.NORMAL and assignment.kind == AssignmentKind.NORMAL
    if assignment.status == AssignmentStatus.EXPIRED and counts:
        # The slot went back to the pool at expiry; take it back if it is still free.
        if task.assigned >= task.overlap:
            raise AssignmentError(
                "your time on this task ran out and other annotators have completed it; "
                "this submission was not recorded",
                code="lease_lost",
            )
        task.assigned += 1
    update = {"assigned": task.assigned, "submitted": task.submitted + (1 if counts else 0)}
    if counts:
        Task.objects.filter(pk=task.pk).update(**update)
        task.assigned, task.submitted = update["assigned"], update["submitted"]
    submitted = {
        "status": AssignmentStatus.SUBMITTED,
        "submitted_at": now,
        "active_ms": active_ms,
        "updated_at": now,
    }
    Assignment.objects.filter(pk=assignment.pk).update(**submitted)
    for name, value in submitted.items():  # what refresh_from_db would read, without a query
        setattr(assignment, name, value)
    HumanScore.objects.bulk_create(
        HumanScore(
            assignment_id=assignment.pk,
            campaign_id=assignment.campaign_id,
            response_id=task.response_id,
            annotator_id=annotator.pk,
            skill_id=skill.skill_id,
            rubric_id=skill.rubric_id,
            score=value.score,
            is_na=value.score is None,
            rationale=value.rationale,
            time_ms=value.time_ms,
        )
        for skill, value in rows
    )
    return SubmitResult(assignment, created=True, late=late)


def _validate_scores(asked: list[TaskSkill], scores: list[ScoreInput]):
    by_skill: dict[int, ScoreInput] = {}
    for value in scores:
        if value.skill_id in by_skill:
            raise AssignmentError("a skill was scored twice", code="invalid")
        by_skill[value.skill_id] = value
    asked_ids = {s.skill_id for s in asked}
    extra = set(by_skill) - asked_ids
    if extra:
        raise AssignmentError(
            "a score was given for a skill this task does not ask", code="invalid"
        )
    missing = [s.name for s in asked if s.skill_id not in by_skill]
    if missing:
        raise AssignmentError(f"please score: {', '.join(missing)}", code="incomplete")
    rows = []
    for skill in asked:
        value = by_skill[skill.skill_id]
        if value.score is not None and (
            isinstance(value.score, bool) or not 1 <= int(value.score) <= 5
        ):
            raise AssignmentError(f"{skill.name}: a score is 1 to 5, or N/A", code="invalid")
        if len(value.rationale) > MAX_RATIONALE:
            raise AssignmentError(
                f"{skill.name}: the rationale is longer than {MAX_RATIONALE} characters",
                code="invalid",
            )
        if value.time_ms is not None and not 0 <= value.time_ms <= 24 * 3600 * 1000:
            raise AssignmentError("time on task is out of range", code="invalid")
        rows.append((skill, value))
    return rows


# --- skip, flag, edit, expire ---------------------------------------------------------------------


@transaction.atomic
def assignment_skip(
    *, assignment_id: int, annotator, reason: str, flag: bool = False
) -> Assignment:
    """Give a task back (with a reason; `flag` marks the item as broken). Frees the slot;
    the annotator is not offered the same task again."""
    reason = reason.strip()[:300]
    if not reason:
        raise AssignmentError("please say why you skip this task", code="invalid")
    try:
        assignment = locks.assignment_lock(assignment_id=assignment_id)
    except Assignment.DoesNotExist:
        raise AssignmentError("no such task", code="not_found") from None
    if assignment.annotator_id != annotator.pk:
        raise AssignmentError("no such task", code="not_found")
    if assignment.status == AssignmentStatus.SKIPPED:
        return assignment
    if assignment.status != AssignmentStatus.ACTIVE:
        raise AssignmentError(
            f"this task is {assignment.status}; it cannot be skipped", code="invalid"
        )
    task = locks.task_lock(task_id=assignment.task_id)
    if task.kind == TaskKind.NORMAL and assignment.kind == AssignmentKind.NORMAL:
        Task.objects.filter(pk=task.pk).update(assigned=F("assigned") - 1)
    Assignment.objects.filter(pk=assignment.pk).update(
        status=AssignmentStatus.SKIPPED,
        skip_reason=reason,
        flagged=flag,
        flag_reason=reason if flag else "",
        updated_at=timezone.now(),
    )
    assignment.refresh_from_db()
    return assignment


@transaction.atomic
def human_score_edit(
    *, score_id: int, editor, score: int | None, rationale: str | None = None
) -> HumanScore:
    """Change a submitted score, keeping the before/after in HumanScoreRevision."""
    row = HumanScore.objects.select_for_update().get(pk=score_id)
    if row.annotator_id != editor.pk and not (editor.is_staff or editor.is_superuser):
        raise AssignmentError("no such score", code="not_found")
    if score is not None and not 1 <= score <= 5:
        raise AssignmentError("a score is 1 to 5, or N/A", code="invalid")
    before = {"score": row.score, "is_na": row.is_na, "rationale": row.rationale}
    row.score = score
    row.is_na = score is None
    if rationale is not None:
        row.rationale = rationale[:MAX_RATIONALE]
    after = {"score": row.score, "is_na": row.is_na, "rationale": row.rationale}
    if before == after:
        return row
    row.full_clean()
    row.save(update_fields=["score", "is_na", "rationale", "updated_at"])
    HumanScoreRevision.objects.create(score=row, edited_by=editor, before=before, after=after)
    return row


def assignments_expire_stale(*, campaign_id: int | None = None, limit: int = 1000) -> int:
    """Expire leases past their time and free their slots. Returns how many expired.

    Each lease is expired in its own short transaction (assignment, then task: the lock
    order), with a conditional update so a concurrent submit wins cleanly.
    """
    stale = Assignment.objects.filter(
        status=AssignmentStatus.ACTIVE, expires_at__lte=timezone.now()
    )
    if campaign_id is not None:
        stale = stale.filter(campaign_id=campaign_id)
    expired = 0
    for assignment_id in stale.order_by("pk").values_list("pk", flat=True)[:limit]:
        with transaction.atomic():
            won = Assignment.objects.filter(
                pk=assignment_id, status=AssignmentStatus.ACTIVE, expires_at__lte=timezone.now()
            ).update(status=AssignmentStatus.EXPIRED, updated_at=timezone.now())
            if not won:
                continue
            assignment = Assignment.objects.select_related("task").get(pk=assignment_id)
            if assignment.task.kind == TaskKind.NORMAL and assignment.kind == AssignmentKind.NORMAL:
                locks.task_lock(task_id=assignment.task_id)
                Task.objects.filter(pk=assignment.task_id).update(assigned=F("assigned") - 1)
            expired += 1
    return expired


__all__ = [
    "AssignmentError",
    "ScoreInput",
    "SubmitResult",
    "TaskSkill",
    "assignment_claim_next",
    "assignment_next",
    "assignment_skip",
    "assignments_expire_stale",
    "campaign_has_annotator",
    "human_score_edit",
    "human_score_submit",
    "task_skills",
]
