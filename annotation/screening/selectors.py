"""Reads of screening: an annotator's phase and place in it (the scoring card), whether they
were screened out (the idle card, the API, the study's completion page), and for
researchers the campaign's screening tasks, a summary and the results per annotator."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Q
from django.utils.translation import gettext

from annotation.models import (
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    Screening,
    ScreeningPhase,
    Skill,
    Task,
    TaskKind,
)

SCREENING_KINDS = (TaskKind.TRAINING, TaskKind.QUALIFICATION)
_PHASE_KIND = {
    ScreeningPhase.TRAINING: TaskKind.TRAINING,
    ScreeningPhase.QUALIFICATION: TaskKind.QUALIFICATION,
}


def screening_phase(*, campaign: Campaign, user) -> str | None:
    """The user's screening phase in the campaign (a ScreeningPhase value); None before
    their first claim there."""
    return (
        Screening.objects.filter(campaign=campaign, annotator=user)
        .values_list("phase", flat=True)
        .first()
    )


def screening_failed(*, campaign: Campaign, user) -> bool:
    """Whether the user was screened out of the campaign (their qualification result is
    below its pass mark)."""
    return screening_phase(campaign=campaign, user=user) == ScreeningPhase.FAILED


def screening_progress(*, campaign: Campaign, user) -> dict | None:
    """Where the user stands in the campaign's screening, for the label on the scoring card
    ("Training 2 of 5", "Qualification 1 of 4"): {"phase", "label", "position", "total"}.
    `position` counts the phase's tasks answered, plus the one held now. None when the
    campaign does not screen, or the user is not in training or qualification (two queries
    at most; none for a campaign without screening)."""
    if not campaign.screening:
        return None
    phase = screening_phase(campaign=campaign, user=user)
    if phase not in _PHASE_KIND:
        return None
    kind = _PHASE_KIND[ScreeningPhase(phase)]
    counts = Task.objects.filter(campaign=campaign, kind=kind).aggregate(
        total=Count("pk", distinct=True),
        answered=Count(
            "assignments",
            filter=Q(
                assignments__annotator=user,
                assignments__kind=AssignmentKind.NORMAL,
                assignments__status__in=[AssignmentStatus.SUBMITTED, AssignmentStatus.SKIPPED],
            ),
        ),
        held=Count(
            "assignments",
            filter=Q(
                assignments__annotator=user,
                assignments__status=AssignmentStatus.ACTIVE,
            ),
        ),
    )
    total = counts["total"]
    position = min(total, counts["answered"] + counts["held"])
    return {
        "phase": phase,
        "label": gettext("Training") if kind == TaskKind.TRAINING else gettext("Qualification"),
        "position": max(position, 1) if total else 0,
        "total": total,
    }


# --- researchers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScreeningSummary:
    enabled: bool
    pass_mark: float
    rule: str
    rule_label: str
    training_tasks: int
    qualification_tasks: int
    phases: dict[str, int]  # annotators per phase (every phase present)

    @property
    def annotators(self) -> int:
        return sum(self.phases.values())


def screening_summary(*, campaign: Campaign) -> ScreeningSummary:
    """Settings, task counts and annotators per phase (two queries)."""
    tasks = Task.objects.filter(campaign=campaign).aggregate(
        training=Count("pk", filter=Q(kind=TaskKind.TRAINING)),
        qualification=Count("pk", filter=Q(kind=TaskKind.QUALIFICATION)),
    )
    phases = dict.fromkeys(ScreeningPhase.values, 0)
    for phase, n in (
        Screening.objects.filter(campaign=campaign)
        .order_by()
        .values_list("phase")
        .annotate(n=Count("pk"))
    ):
        phases[phase] = n
    return ScreeningSummary(
        enabled=campaign.screening,
        pass_mark=campaign.qualification_pass_mark,
        rule=campaign.qualification_rule,
        rule_label=campaign.get_qualification_rule_display(),
        training_tasks=tasks["training"],
        qualification_tasks=tasks["qualification"],
        phases=phases,
    )


@dataclass(frozen=True)
class SkillAgreement:
    skill_id: int
    skill: str
    agreed: int
    total: int

    @property
    def share(self) -> float | None:
        return self.agreed / self.total if self.total else None


@dataclass
class ScreeningResult:
    annotator_id: int
    username: str
    phase: str
    phase_label: str
    score: float | None
    decided_at: datetime | None
    started_at: datetime
    training_answered: int = 0
    qualification_answered: int = 0
    skills: list[SkillAgreement] = field(default_factory=list)
    # why the result is not what it seems: an annotator held in the test because nothing
    # in it compared, or one passed before such passes were refused
    note: str = ""

    def as_json(self) -> dict:
        return {
            "annotator": self.username,
            "phase": self.phase,
            "score": self.score,
            "decided_at": self.decided_at,
            "started_at": self.started_at,
            "training_answered": self.training_answered,
            "qualification_answered": self.qualification_answered,
            "skills": [
                {"skill": s.skill, "agreed": s.agreed, "total": s.total, "agreement": s.share}
                for s in self.skills
            ],
            "note": self.note,
        }


#: The notes of screening_results.
NOTE_NOTHING_COMPARED = (
    "answered every qualification task, but none compared a skill it asked: no decision "
    "until the test has a task whose known scores its item's tasks ask"
)
NOTE_PASSED_VACUOUSLY = (
    "passed without any known score compared (decided before such passes were refused)"
)


def screening_results(*, campaign: Campaign) -> list[ScreeningResult]:
    """Every annotator who started the campaign's screening, by username: phase, score
    (the lowest per-skill agreement), decision time, answers per phase, agreement per
    skill, and a note where the result needs one (four queries)."""
    rows = {
        s["annotator_id"]: ScreeningResult(
            annotator_id=s["annotator_id"],
            username=s["annotator__username"],
            phase=s["phase"],
            phase_label=ScreeningPhase(s["phase"]).label,
            score=s["score"],
            decided_at=s["decided_at"],
            started_at=s["created_at"],
            skills=[
                SkillAgreement(int(k), k, v["agreed"], v["total"])
                for k, v in sorted(s["per_skill"].items(), key=lambda kv: int(kv[0]))
            ],
        )
        for s in Screening.objects.filter(campaign=campaign)
        .order_by("annotator__username")
        .values(
            "annotator_id",
            "annotator__username",
            "phase",
            "score",
            "decided_at",
            "created_at",
            "per_skill",
        )
    }
    answered = (
        Assignment.objects.filter(
            campaign=campaign,
            annotator_id__in=list(rows),
            kind=AssignmentKind.NORMAL,
            task__kind__in=SCREENING_KINDS,
            status__in=[AssignmentStatus.SUBMITTED, AssignmentStatus.SKIPPED],
        )
        .order_by()
        .values_list("annotator_id", "task__kind")
        .annotate(n=Count("pk"))
    )
    for annotator_id, kind, n in answered:
        if kind == TaskKind.TRAINING:
            rows[annotator_id].training_answered = n
        else:
            rows[annotator_id].qualification_answered = n
    skill_ids = {s.skill_id for r in rows.values() for s in r.skills}
    names = dict(Skill.objects.filter(pk__in=skill_ids).values_list("pk", "name"))
    for r in rows.values():
        r.skills = [
            SkillAgreement(
                s.skill_id, names.get(s.skill_id, f"skill {s.skill_id}"), s.agreed, s.total
            )
            for s in r.skills
        ]
    in_test = Task.objects.filter(campaign=campaign, kind=TaskKind.QUALIFICATION).count()
    for r in rows.values():
        compared = any(s.total for s in r.skills)
        if (
            r.phase == ScreeningPhase.QUALIFICATION
            and in_test
            and r.qualification_answered >= in_test
        ):
            r.note = NOTE_NOTHING_COMPARED
        elif r.phase == ScreeningPhase.PASSED and r.qualification_answered and not compared:
            r.note = NOTE_PASSED_VACUOUSLY
    return list(rows.values())
