"""Campaign configuration and lifecycle: create, edit, activate (tasks + pinned rubrics),
pause, resume, gold/attention tasks, annotator expertise."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.models import (
    AnnotatorExpertise,
    Campaign,
    CampaignRubric,
    CampaignStatus,
    Dataset,
    Domain,
    GoldScore,
    ItemSkill,
    Project,
    ProjectMembership,
    Response,
    Skill,
    SkillMode,
    Task,
    TaskKind,
)
from annotation.selectors import rubrics_current_for_project


class CampaignStateError(ValidationError):
    """The request is well formed, but the campaign's status refuses it: editing a
    finished campaign, changing the structure of a running one, activating a finished
    one, or a status change its status does not allow (the API's 409)."""


@transaction.atomic
def campaign_create(
    *,
    project: Project,
    dataset: Dataset,
    name: str,
    overlap: int = 3,
    skill_mode: str = SkillMode.ITEM,
    fixed_skills: list[Skill] | None = None,
    model_names: list[str] | None = None,
    show_reference: bool = True,
    quota_per_annotator: int | None = None,
    lease_seconds: int = 900,
    instructions: str = "",
    annotators=(),
    groups=(),
    route_by_domain: bool = False,
    gold_rate: float = 0.0,
    repeat_rate: float = 0.0,
    gold_feedback: bool = False,
    created_by=None,
) -> Campaign:
    """Create a campaign in draft. Nothing is assigned until `campaign_activate`."""
    if dataset.project_id != project.pk:
        raise ValidationError("the dataset belongs to another project")
    if skill_mode == SkillMode.FIXED and not fixed_skills:
        raise ValidationError("a fixed-skill campaign needs at least one skill")
    campaign = Campaign(
        project=project,
        dataset=dataset,
        name=name.strip(),
        overlap=overlap,
        skill_mode=skill_mode,
        model_names=sorted(set(model_names or [])),
        show_reference=show_reference,
        quota_per_annotator=quota_per_annotator,
        lease_seconds=lease_seconds,
        instructions=instructions,
        route_by_domain=route_by_domain,
        gold_rate=gold_rate,
        repeat_rate=repeat_rate,
        gold_feedback=gold_feedback,
        created_by=created_by,
    )
    campaign.full_clean()
    campaign.save()
    if fixed_skills:
        campaign.fixed_skills.set(fixed_skills)
    campaign.annotators.set(annotators)
    campaign.groups.set(groups)
    return campaign


#: The longest lease a campaign may give (the shortest, 30 s, is a database constraint).
MAX_LEASE_SECONDS = 24 * 3600

# What a running campaign may still change: its pool, pacing, wording and QC rates. The
# rest decides which tasks exist and which rubrics are pinned, so it is fixed at activation.
CAMPAIGN_STRUCTURE = ("dataset", "model_names", "skill_mode", "fixed_skills", "overlap")
CAMPAIGN_SETTINGS = (
    "name",
    "instructions",
    "show_reference",
    "quota_per_annotator",
    "lease_seconds",
    "route_by_domain",
    "gold_rate",
    "repeat_rate",
    "gold_feedback",
)
CAMPAIGN_POOL = ("annotators", "groups")


@transaction.atomic
def campaign_update(*, campaign: Campaign, **changes: Any) -> Campaign:
    """Change a campaign's settings; keyword names are those of `campaign_create`.

    A draft may change anything. An active or paused campaign may change its pool, quota,
    lease time, instructions and QC rates, but not what decides its tasks and pinned
    rubrics (CAMPAIGN_STRUCTURE); passing those unchanged is allowed. A finished campaign
    cannot be edited. Raises ValidationError.
    """
    unknown = set(changes) - {*CAMPAIGN_STRUCTURE, *CAMPAIGN_SETTINGS, *CAMPAIGN_POOL}
    if unknown:
        raise TypeError(f"campaign_update() got unexpected settings: {', '.join(sorted(unknown))}")
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if campaign.status == CampaignStatus.FINISHED:
        raise CampaignStateError("a finished campaign cannot be edited")
    if "name" in changes:
        changes["name"] = changes["name"].strip()
    if "model_names" in changes:
        changes["model_names"] = sorted(set(changes["model_names"] or []))
    fixed = changes.pop("fixed_skills", None)
    fixed_ids = None if fixed is None else {s.pk for s in fixed}
    if campaign.status != CampaignStatus.DRAFT:
        changed = [
            name
            for name in CAMPAIGN_STRUCTURE
            if name in changes and getattr(campaign, name) != changes[name]
        ]
        if fixed_ids is not None and fixed_ids != set(
            campaign.fixed_skills.values_list("pk", flat=True)
        ):
            changed.append("fixed_skills")
        if changed:
            raise CampaignStateError(
                f"only a draft campaign can change {', '.join(changed)}; this one is "
                f"{campaign.status}"
            )
    pool = {name: changes.pop(name) for name in CAMPAIGN_POOL if name in changes}
    for name, value in changes.items():
        setattr(campaign, name, value)
    if campaign.dataset.project_id != campaign.project_id:
        raise ValidationError("the dataset belongs to another project")
    if campaign.skill_mode == SkillMode.FIXED and not (
        fixed_ids if fixed_ids is not None else campaign.fixed_skills.exists()
    ):
        raise ValidationError("a fixed-skill campaign needs at least one skill")
    campaign.full_clean()
    campaign.save()
    if fixed is not None:
        campaign.fixed_skills.set(fixed)
    for name, value in pool.items():
        getattr(campaign, name).set(value)
    return campaign


@transaction.atomic
def campaign_activate(*, campaign: Campaign) -> int:
    """Create the campaign's tasks (one per selected response) and pin the rubric in force
    for each skill. Idempotent: tasks and pins already there are kept. Returns the number
    of tasks created."""
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if campaign.status == CampaignStatus.FINISHED:
        raise CampaignStateError("a finished campaign cannot be activated again")
    skill_ids = _campaign_skill_ids(campaign)
    rubrics = rubrics_current_for_project(project=campaign.project)
    missing = [sid for sid in skill_ids if sid not in rubrics]
    if missing:
        names = ", ".join(Skill.objects.filter(pk__in=missing).values_list("name", flat=True))
        raise ValidationError(f"no rubric for: {names}")
    pinned = set(
        CampaignRubric.objects.filter(campaign=campaign).values_list("skill_id", flat=True)
    )
    CampaignRubric.objects.bulk_create(
        CampaignRubric(campaign=campaign, skill_id=sid, rubric=rubrics[sid])
        for sid in skill_ids
        if sid not in pinned
    )
    created = _tasks_create(campaign)
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.ACTIVE, updated_at=timezone.now()
    )
    return created


def _campaign_skill_ids(campaign: Campaign) -> list[int]:
    if campaign.skill_mode == SkillMode.FIXED:
        return list(campaign.fixed_skills.values_list("pk", flat=True))
    return list(
        ItemSkill.objects.filter(item__dataset=campaign.dataset)
        .order_by()  # Meta.ordering would otherwise leak into DISTINCT
        .values_list("skill_id", flat=True)
        .distinct()
    )


def _tasks_create(campaign: Campaign) -> int:
    responses = Response.objects.filter(item__dataset=campaign.dataset)
    if campaign.model_names:
        responses = responses.filter(model_name__in=campaign.model_names)
    # Gold/attention responses are not also normal tasks: seeing one twice would give it away.
    existing = Task.objects.filter(campaign=campaign)
    ids = responses.exclude(pk__in=existing.values("response_id")).order_by("pk")
    created = 0
    batch: list[Task] = []
    for response_id in ids.values_list("pk", flat=True).iterator(chunk_size=5000):
        batch.append(
            Task(
                campaign=campaign,
                response_id=response_id,
                kind=TaskKind.NORMAL,
                overlap=campaign.overlap,
            )
        )
        if len(batch) == 5000:
            created += len(Task.objects.bulk_create(batch))
            batch = []
    if batch:
        created += len(Task.objects.bulk_create(batch))
    return created


def campaign_set_status(*, campaign: Campaign, status: str) -> Campaign:
    """Pause, resume or finish. Pausing stops new claims; open leases may still submit."""
    # keyed by str: `status` is the value a caller sent, looked up as is
    allowed: dict[str, set[CampaignStatus]] = {
        CampaignStatus.PAUSED: {CampaignStatus.ACTIVE},
        CampaignStatus.ACTIVE: {CampaignStatus.PAUSED},
        CampaignStatus.FINISHED: {CampaignStatus.ACTIVE, CampaignStatus.PAUSED},
    }
    if status not in allowed:
        raise ValidationError(f"cannot set a campaign to {status!r} directly")
    changed = Campaign.objects.filter(pk=campaign.pk, status__in=allowed[status]).update(
        status=status, updated_at=timezone.now()
    )
    campaign.refresh_from_db()
    if not changed:
        raise CampaignStateError(f"a {campaign.status} campaign cannot become {status}")
    return campaign


@transaction.atomic
def gold_task_set(
    *,
    campaign: Campaign,
    response: Response,
    scores: dict[int, int | None],
    kind: str = TaskKind.GOLD,
    tolerance: int = 0,
    explanation: str = "",
) -> Task:
    """Make `response` a gold (or attention-check) task with known scores per skill id
    (None = N/A). Replaces earlier known scores of that task."""
    if kind not in (TaskKind.GOLD, TaskKind.ATTENTION):
        raise ValidationError("a gold task is of kind gold or attention")
    if response.item.dataset_id != campaign.dataset_id:
        raise ValidationError("the response is not in the campaign's dataset")
    for value in scores.values():
        if value is not None and not 1 <= value <= 5:
            raise ValidationError("known scores are 1-5 or None (N/A)")
    # A normal task for the same response would show it twice; drop it while unassigned.
    Task.objects.filter(
        campaign=campaign, response=response, kind=TaskKind.NORMAL, assigned=0, submitted=0
    ).delete()
    task, _ = Task.objects.get_or_create(
        campaign=campaign, response=response, kind=kind, defaults={"overlap": 0}
    )
    GoldScore.objects.filter(task=task).delete()
    GoldScore.objects.bulk_create(
        GoldScore(
            task=task,
            skill_id=skill_id,
            score=value,
            is_na=value is None,
            tolerance=tolerance,
            explanation=explanation,
        )
        for skill_id, value in scores.items()
    )
    return task


@transaction.atomic
def annotator_expertise_set(*, project: Project, user, domains) -> list[Domain]:
    """Set the domains `user` is qualified for, among the domains `project` uses (built-in
    plus its own); expertise in other projects' domains is kept. Campaigns that route by
    domain give an annotator with declared domains only items of those domains.
    Raises ValidationError when the user is not a member or a domain is out of scope."""
    if not ProjectMembership.objects.filter(project=project, user=user).exists():
        raise ValidationError("the user is not a member of this project")
    scope = Domain.objects.filter(Q(project__isnull=True) | Q(project=project))
    wanted = {d.pk for d in domains}
    if wanted - set(scope.filter(pk__in=wanted).values_list("pk", flat=True)):
        raise ValidationError("a domain is not used by this project")
    AnnotatorExpertise.objects.filter(user=user, domain__in=scope).exclude(
        domain_id__in=wanted
    ).delete()
    AnnotatorExpertise.objects.bulk_create(
        [AnnotatorExpertise(user=user, domain_id=pk) for pk in sorted(wanted)],
        ignore_conflicts=True,  # already declared (or declared concurrently): keep it
    )
    return list(scope.filter(pk__in=wanted).order_by("order", "name"))
