"""Screening: training and a qualification test before an annotator gets real tasks.

A campaign with `screening` on starts each annotator in phase training: every training
task (in task id order; the known scores and their explanation are shown after each
answer), then every qualification task (no feedback), then a decision from the
qualification answers: per skill, the share of known scores matched (exactly, or within 1
as the campaign's rule says; N/A matches only N/A), passed iff every skill's share reaches
the pass mark. Only a passed annotator gets normal, gold or repeat tasks
(annotation/services/assignments.py asks `screening_claim` first); a failed one gets none.

The phase moves on in `screening_advance`, which the submission and the skip of a
screening task call after their write, and the claim calls when it finds nothing left in
the phase. It locks the annotator's Screening row (select_for_update) and decides from what
is committed, so concurrent calls settle it once: idempotent and race-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from annotation.gold import answer_correct
from annotation.models import (
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    GoldScore,
    HumanScore,
    QualificationRule,
    Screening,
    ScreeningPhase,
    Task,
    TaskKind,
)

#: Task kinds that belong to screening (never data: accepted_assignment_q wants normal).
SCREENING_KINDS = (TaskKind.TRAINING, TaskKind.QUALIFICATION)
#: An answered screening task: its assignment is final (an expired one is offered again).
_FINAL = (AssignmentStatus.SUBMITTED, AssignmentStatus.SKIPPED)
_DECIDED = (ScreeningPhase.PASSED, ScreeningPhase.FAILED)
_PHASE_KIND = {
    ScreeningPhase.TRAINING: TaskKind.TRAINING,
    ScreeningPhase.QUALIFICATION: TaskKind.QUALIFICATION,
}


# --- pure rules ---------------------------------------------------------------------------------


def score_agrees(
    *, given: int | None, known: int | None, rule: str = QualificationRule.EXACT
) -> bool:
    """Whether a given score (None = N/A) matches a known one under the campaign's rule:
    exact, or within 1 (`within1`). N/A matches only N/A (annotation/gold.py's rule, with the
    rule's tolerance)."""
    return answer_correct(given=given, known=known, tolerance=rule_tolerance(rule))


def rule_tolerance(rule: str) -> int:
    """The GoldScore.tolerance that shows a rule on the feedback card (± 1 or exact)."""
    return 1 if rule == QualificationRule.WITHIN_ONE else 0


@dataclass(frozen=True)
class Decision:
    per_skill: dict[str, dict[str, int]]  # {skill id: {"agreed": n, "total": n}}
    score: float | None  # the lowest per-skill share; None when nothing was known
    passed: bool
    # False: the test compared nothing (its answered tasks' known scores name no skill they
    # asked), so there is no decision to make: the annotator stays in the qualification
    decided: bool = True


def qualification_decide(
    *, per_skill: dict[str, dict[str, int]], pass_mark: float, answered: int = 0
) -> Decision:
    """Passed iff every skill's share of agreement reaches the pass mark; the score is the
    lowest share. A skill with no known score compared (total 0) is no agreement: it is left
    out, never counted as met. When nothing was compared at all: passed if the annotator
    answered no qualification task (the campaign has none: training alone is required),
    otherwise no decision (`decided` False): a test whose known scores name only skills its
    tasks did not ask says nothing about the annotator, so it neither passes nor fails them.
    `answered` is the qualification tasks the annotator answered (submitted or skipped)."""
    shares = [v["agreed"] / v["total"] for v in per_skill.values() if v["total"]]
    if not shares:
        if answered:
            return Decision(per_skill, None, passed=False, decided=False)
        return Decision(per_skill, None, True)
    score = min(shares)
    # a share is a ratio of small counts: compare with a hair of slack so 0.8 == 4/5 passes
    return Decision(per_skill, score, score >= pass_mark - 1e-9)


# --- settings and tasks (researchers) -----------------------------------------------------------


@transaction.atomic
def screening_settings_update(
    *, campaign: Campaign, screening: bool, pass_mark: float, rule: str
) -> Campaign:
    """Turn screening on or off and set the pass mark (0..1, a share per skill) and the
    agreement rule. Annotators already decided keep their decision. The rule is also
    written as the tolerance of the training tasks' known scores, which the feedback card
    shows."""
    if not 0 <= pass_mark <= 1:
        raise ValidationError("the pass mark is a share between 0 and 1")
    if rule not in QualificationRule.values:
        raise ValidationError(f"unknown agreement rule {rule!r}")
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    campaign.screening = screening
    campaign.qualification_pass_mark = pass_mark
    campaign.qualification_rule = rule
    campaign.full_clean()
    campaign.save(
        update_fields=["screening", "qualification_pass_mark", "qualification_rule", "updated_at"]
    )
    GoldScore.objects.filter(task__campaign=campaign, task__kind__in=SCREENING_KINDS).update(
        tolerance=rule_tolerance(rule)
    )
    return campaign


@transaction.atomic
def screening_task_remove(*, campaign: Campaign, task_id: int) -> None:
    """Remove a training or qualification task that no annotator was given yet (once
    served, its answers are part of someone's screening and are kept)."""
    task = (
        Task.objects.select_for_update()
        .filter(pk=task_id, campaign=campaign, kind__in=SCREENING_KINDS)
        .first()
    )
    if task is None:
        raise ValidationError("no such training or qualification task in this campaign")
    if Assignment.objects.filter(task=task).exists():
        raise ValidationError(
            f"task {task.pk} was already given to annotators; it is kept with their answers"
        )
    task.delete()


# --- the claim gate and the phases (annotators) -------------------------------------------------


def screening_claim(
    *, campaign_id: int, annotator_id: int, lease_seconds: int, now: datetime
) -> tuple[bool, Assignment | None]:
    """(passed, lease): whether the annotator passed screening here (then the caller claims
    a real task), else the training or qualification task to do now as a lease, or None
    (screened out). Creates the annotator's Screening, in phase training, on the first
    claim. The caller has checked that the annotator holds no live lease here.

    The task is the phase's first (by id) that the annotator has not answered (submitted
    or skipped); one whose lease expired is offered again (the same assignment, revived).
    A lost race on the one-lease index raises IntegrityError, which the claim answers by
    claiming again (it then resumes the other tab's lease)."""
    screening, _ = Screening.objects.get_or_create(
        campaign_id=campaign_id, annotator_id=annotator_id
    )
    # A phase with nothing left moves on; training -> qualification -> decided at most.
    for _ in range(3):
        if screening.phase == ScreeningPhase.PASSED:
            return True, None
        if screening.phase == ScreeningPhase.FAILED:
            return False, None
        expires_at = now + timedelta(seconds=lease_seconds)
        lease = _screening_lease(
            campaign_id, annotator_id, _PHASE_KIND[ScreeningPhase(screening.phase)], expires_at
        )
        if lease is not None:
            return False, lease
        advanced = screening_advance(campaign_id=campaign_id, annotator_id=annotator_id)
        assert advanced is not None  # created above; screenings are never deleted
        if advanced.phase == screening.phase:
            return False, None  # a task of the phase is held by a concurrent claim
        screening = advanced
    return False, None


def _open_tasks(campaign_id: int, annotator_id: int, kind: str):
    answered = Assignment.objects.filter(
        task_id=OuterRef("pk"),
        annotator_id=annotator_id,
        kind=AssignmentKind.NORMAL,
        status__in=_FINAL,
    )
    return Task.objects.filter(campaign_id=campaign_id, kind=kind).filter(~Exists(answered))


@transaction.atomic  # a savepoint in a caller's transaction: a lost race leaves it usable
def _screening_lease(
    campaign_id: int, annotator_id: int, kind: str, expires_at: datetime
) -> Assignment | None:
    task_id = (
        _open_tasks(campaign_id, annotator_id, kind)
        .order_by("pk")
        .values_list("pk", flat=True)
        .first()
    )
    if task_id is None:
        return None
    earlier = Assignment.objects.filter(
        task_id=task_id, annotator_id=annotator_id, kind=AssignmentKind.NORMAL
    ).first()
    if earlier is None:
        return Assignment.objects.create(
            task_id=task_id,
            campaign_id=campaign_id,
            annotator_id=annotator_id,
            expires_at=expires_at,
        )
    # Its lease expired unanswered: the same assignment again (UNIQUE(task, annotator, kind)).
    revived = Assignment.objects.filter(pk=earlier.pk, status=AssignmentStatus.EXPIRED).update(
        status=AssignmentStatus.ACTIVE, expires_at=expires_at, updated_at=timezone.now()
    )
    if not revived:
        return None
    earlier.refresh_from_db()
    return earlier


@transaction.atomic
def screening_advance(*, campaign_id: int, annotator_id: int) -> Screening | None:
    """Move the annotator's screening on as far as their answers allow: training done ->
    qualification; every qualification task answered -> the decision (per-skill agreement,
    score, passed or failed, decided_at). No qualification task at all: passed after
    training. Idempotent (a decided screening is returned unchanged) and race-safe (the
    Screening row is locked, so two calls decide once). None when the annotator has no
    screening here."""
    screening = (
        Screening.objects.select_for_update()
        .filter(campaign_id=campaign_id, annotator_id=annotator_id)
        .first()
    )
    if screening is None or screening.phase in _DECIDED:
        return screening
    phase = screening.phase
    if phase == ScreeningPhase.TRAINING:
        if _open_tasks(campaign_id, annotator_id, TaskKind.TRAINING).exists():
            return screening
        phase = ScreeningPhase.QUALIFICATION
    if not _open_tasks(campaign_id, annotator_id, TaskKind.QUALIFICATION).exists():
        campaign = Campaign.objects.only("qualification_pass_mark", "qualification_rule").get(
            pk=campaign_id
        )
        per_skill, answered = _agreement(campaign, annotator_id)
        decision = qualification_decide(
            per_skill=per_skill, pass_mark=campaign.qualification_pass_mark, answered=answered
        )
        if decision.decided:
            phase = ScreeningPhase.PASSED if decision.passed else ScreeningPhase.FAILED
            screening.per_skill = decision.per_skill
            screening.score = decision.score
            screening.decided_at = timezone.now()
        else:
            # nothing comparable: no decision, until the test has a task that compares
            phase = ScreeningPhase.QUALIFICATION
    if phase != screening.phase:
        screening.phase = phase
        screening.save()
    return screening


def _agreement(campaign: Campaign, annotator_id: int) -> tuple[dict[str, dict[str, int]], int]:
    """({skill id: {"agreed", "total"}} over the campaign's qualification tasks' known
    scores, the qualification tasks the annotator answered). A known score of a submitted
    task counts when the task asked its skill (the annotator scored it); one for a skill
    the task did not ask compares nothing and is left out (never counted as agreement); a
    skipped task counts as not agreeing on each of its known scores (skipping the hard
    items must not raise one's score)."""
    status_of = dict(
        Assignment.objects.filter(
            campaign=campaign,
            annotator_id=annotator_id,
            kind=AssignmentKind.NORMAL,
            task__kind=TaskKind.QUALIFICATION,
        ).values_list("task_id", "status")
    )
    given = {
        (task_id, skill_id): None if is_na else score
        for task_id, skill_id, score, is_na in HumanScore.objects.filter(
            campaign=campaign,
            annotator_id=annotator_id,
            assignment__kind=AssignmentKind.NORMAL,
            assignment__task__kind=TaskKind.QUALIFICATION,
        ).values_list("assignment__task_id", "skill_id", "score", "is_na")
    }
    known = GoldScore.objects.filter(
        task__campaign=campaign, task__kind=TaskKind.QUALIFICATION
    ).values_list("task_id", "skill_id", "score", "is_na")
    per_skill: dict[str, dict[str, int]] = {}
    for task_id, skill_id, score, is_na in known.order_by("task_id", "skill_id"):
        status = status_of.get(task_id)
        if status == AssignmentStatus.SUBMITTED:
            if (task_id, skill_id) not in given:
                continue  # a known score for a skill this task did not ask
            agreed = score_agrees(
                given=given[task_id, skill_id],
                known=None if is_na else score,
                rule=campaign.qualification_rule,
            )
        elif status == AssignmentStatus.SKIPPED:
            agreed = False
        else:
            continue  # added after the annotator finished the test: not part of theirs
        counts = per_skill.setdefault(str(skill_id), {"agreed": 0, "total": 0})
        counts["total"] += 1
        counts["agreed"] += int(agreed)
    answered = sum(status in _FINAL for status in status_of.values())
    return per_skill, answered
