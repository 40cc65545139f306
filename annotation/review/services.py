"""Writes of review (docs/REVIEW.md): adjudicated scores, the review settings of a campaign,
and adaptive overlap.

**Adjudicated scores are kept apart.** A reviewer's settled score of a (response, skill)
in a campaign is one AdjudicatedScore row; the annotators' HumanScore rows are never
touched. Exports show both, and the report uses the adjudicated ones only when asked to.

**Adaptive overlap.** For an active campaign with `adaptive_spread` set, a complete normal
task (`submitted == overlap`) whose accepted scores spread by `adaptive_spread` or more on
some skill (N/A beside a number counts) gets its overlap raised by one (`adaptive_extra +=
1`), while its `adaptive_extra` stays within `adaptive_max_extra` and the campaign's total
within `adaptive_budget` (None: no campaign-wide cap). Raised tasks are no longer complete,
so a second run finds nothing new to raise until the extra annotation has come in: the
sweep is idempotent. A task is raised only when some pool annotator can still be served it
(the re-annotation rules: never had it, under quota, matching domain), and never above
MAX_OVERLAP. The claim scans only tasks with `assigned < campaign.overlap` (its index
bound, annotation/ASSIGNMENT.md), so when a task goes above the campaign's K, K is raised to
match in the same transaction, as re-annotation does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Sum
from django.utils import timezone

from annotation.models import (
    AdjudicatedScore,
    Campaign,
    CampaignStatus,
    Response,
    Skill,
    Task,
    TaskKind,
)
from annotation.review.selectors import disagreeing_response_ids
from annotation.selectors import skills_for_response

# The claim's eligibility rules, shared with re-annotation on purpose (one definition of
# "who could still be served this task").
from annotation.services.reannotation import MAX_OVERLAP, _eligible_counts

logger = logging.getLogger(__name__)

MAX_NOTE = 2000
#: Per-response extra annotations adaptive overlap may ask for (the setting's bounds).
MAX_ADAPTIVE_EXTRA = 5
MAX_ADAPTIVE_BUDGET = 100_000

NA = "na"


def _value(value) -> tuple[int | None, bool]:
    """(score, is_na) of a submitted value: 1-5 or "na"."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in (NA, "n/a"):
            return None, True
        if text.isdigit():
            value = int(text)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        raise ValidationError({"value": ["a score from 1 to 5, or N/A"]})
    return value, False


@dataclass(frozen=True)
class AdjudicationResult:
    score: AdjudicatedScore
    changed: bool  # False: the same value and note were there already


@transaction.atomic
def adjudicated_score_set(
    *, campaign: Campaign, response: Response, skill: Skill, value, note: str = "", reviewer
) -> AdjudicationResult:
    """Record the reviewer's settled score (1-5 or "na") of `response` on `skill` in
    `campaign`, with a note. Idempotent: setting the value and note already there changes
    nothing (not even the reviewer or the time). Raises ValidationError (by field: "value",
    "note", "skill", "response", "campaign") and writes nothing when the campaign is a
    draft, the response is not a task of it, or the skill is not one the campaign asks of
    that response. The raw HumanScore rows are never touched."""
    score, is_na = _value(value)
    note = (note or "").strip()
    if len(note) > MAX_NOTE:
        raise ValidationError({"note": [f"at most {MAX_NOTE} characters"]})
    if campaign.status == CampaignStatus.DRAFT:
        raise ValidationError({"campaign": ["a draft campaign has nothing to review"]})
    if not Task.objects.filter(campaign=campaign, response=response).exists():
        raise ValidationError({"response": ["this response is not a task of the campaign"]})
    asked = {s.skill_id for s in skills_for_response(response=response, campaign=campaign)}
    if skill.pk not in asked:
        raise ValidationError({"skill": [f"{skill.name} is not scored on this response here"]})
    key = {"campaign": campaign, "response": response, "skill": skill}
    found = AdjudicatedScore.objects.select_for_update().filter(**key).first()
    if found is not None:
        if (found.score, found.is_na, found.note) == (score, is_na, note):
            return AdjudicationResult(found, changed=False)
        found.score, found.is_na, found.note, found.reviewer = score, is_na, note, reviewer
        found.full_clean()
        found.save()
        return AdjudicationResult(found, changed=True)
    row = AdjudicatedScore(**key, score=score, is_na=is_na, note=note, reviewer=reviewer)
    row.full_clean(validate_constraints=False)
    try:
        with transaction.atomic():  # a concurrent first save of the same key: take theirs
            row.save()
    except IntegrityError:
        # saved meanwhile by another request: the row exists now, so this takes the
        # update (or no-op) path above
        return adjudicated_score_set(
            campaign=campaign,
            response=response,
            skill=skill,
            value=value,
            note=note,
            reviewer=reviewer,
        )
    return AdjudicationResult(row, changed=True)


@transaction.atomic
def adjudication_save(
    *, campaign: Campaign, response: Response, values: list[tuple[int, str, str]], reviewer
) -> list[AdjudicationResult]:
    """`adjudicated_score_set` for several skills of one response at once, (skill id,
    value, note) each: all of them or, on the first ValidationError, none."""
    skills = Skill.objects.in_bulk([skill_id for skill_id, _, _ in values])
    results = []
    for skill_id, value, note in values:
        skill = skills.get(skill_id)
        if skill is None:
            raise ValidationError({"skill": ["no such skill"]})
        results.append(
            adjudicated_score_set(
                campaign=campaign,
                response=response,
                skill=skill,
                value=value,
                note=note,
                reviewer=reviewer,
            )
        )
    return results


def review_settings_update(
    *,
    campaign: Campaign,
    review_spread: int,
    adaptive_spread: int | None,
    adaptive_max_extra: int,
    adaptive_budget: int | None,
) -> Campaign:
    """Set the campaign's review threshold and adaptive overlap settings. Raises
    ValidationError (by field) and changes nothing when a value is out of range."""
    errors: dict[str, list[str]] = {}
    if not 1 <= review_spread <= 4:
        errors["review_spread"] = ["a spread from 1 to 4"]
    if adaptive_spread is not None and not 1 <= adaptive_spread <= 4:
        errors["adaptive_spread"] = ["a spread from 1 to 4, or empty for off"]
    if not 1 <= adaptive_max_extra <= MAX_ADAPTIVE_EXTRA:
        errors["adaptive_max_extra"] = [f"from 1 to {MAX_ADAPTIVE_EXTRA}"]
    if adaptive_budget is not None and not 0 <= adaptive_budget <= MAX_ADAPTIVE_BUDGET:
        errors["adaptive_budget"] = [f"from 0 to {MAX_ADAPTIVE_BUDGET:,}, or empty for no cap"]
    if errors:
        raise ValidationError(errors)
    Campaign.objects.filter(pk=campaign.pk).update(
        review_spread=review_spread,
        adaptive_spread=adaptive_spread,
        adaptive_max_extra=adaptive_max_extra,
        adaptive_budget=adaptive_budget,
        updated_at=timezone.now(),
    )
    campaign.refresh_from_db()
    return campaign


# --- adaptive overlap ------------------------------------------------------------------------


@dataclass(frozen=True)
class AdaptiveRun:
    campaign_id: int
    raised: tuple[int, ...] = ()  # task ids whose overlap went up by one
    budget_left: int | None = None
    skipped: str = ""  # why nothing was looked at ("" when it ran)


@transaction.atomic
def adaptive_overlap_apply(*, campaign_id: int) -> AdaptiveRun:
    """One adaptive overlap pass over one campaign (module docstring). Locks the campaign
    row, then the candidate tasks by pk (FOR NO KEY UPDATE, the re-annotation order: claims
    skip a locked task, submissions wait for this short transaction)."""
    campaign = Campaign.objects.select_for_update(no_key=True).filter(pk=campaign_id).first()
    if campaign is None:
        return AdaptiveRun(campaign_id, skipped="missing")
    if campaign.status != CampaignStatus.ACTIVE or campaign.adaptive_spread is None:
        return AdaptiveRun(campaign_id, skipped="off")
    normal = Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL)
    used = normal.aggregate(n=Sum("adaptive_extra"))["n"] or 0
    left = None if campaign.adaptive_budget is None else campaign.adaptive_budget - used
    if left is not None and left <= 0:
        return AdaptiveRun(campaign_id, budget_left=0, skipped="budget spent")
    complete = normal.filter(
        submitted=F("overlap"),
        adaptive_extra__lt=campaign.adaptive_max_extra,
        overlap__lt=MAX_OVERLAP,
    )
    wanted = disagreeing_response_ids(
        campaign=campaign,
        spread=campaign.adaptive_spread,
        response_ids=complete.values("response_id"),
    )
    if not wanted:
        return AdaptiveRun(campaign_id, budget_left=left)
    tasks = list(
        complete.filter(response_id__in=wanted).select_for_update(no_key=True).order_by("pk")
    )
    eligible = _eligible_counts(campaign, tasks)
    raised: list[Task] = []
    for task in tasks:
        if left is not None and len(raised) >= left:
            break
        # complete: every slot is taken and submitted, so anyone eligible is new room
        if task.submitted != task.overlap or eligible[task.pk] <= 0:
            continue
        raised.append(task)
    if raised:
        Task.objects.filter(pk__in=[t.pk for t in raised]).update(
            overlap=F("overlap") + 1, adaptive_extra=F("adaptive_extra") + 1
        )
        highest = max(t.overlap + 1 for t in raised)
        if highest > campaign.overlap:
            # the claim's index bound is the campaign's K: without this, never served
            Campaign.objects.filter(pk=campaign.pk).update(
                overlap=highest, updated_at=timezone.now()
            )
        for t in raised:
            logger.info(
                "adaptive overlap: campaign %s task %s (response %s) overlap %s -> %s",
                campaign.pk,
                t.pk,
                t.response_id,
                t.overlap,
                t.overlap + 1,
            )
    return AdaptiveRun(
        campaign_id,
        raised=tuple(t.pk for t in raised),
        budget_left=None if left is None else left - len(raised),
    )


def adaptive_overlap_sweep() -> list[AdaptiveRun]:
    """`adaptive_overlap_apply` for every active campaign with adaptive overlap on, each in
    its own short transaction (beat, every two minutes). Idempotent."""
    ids = Campaign.objects.filter(
        status=CampaignStatus.ACTIVE, adaptive_spread__isnull=False
    ).values_list("pk", flat=True)
    return [adaptive_overlap_apply(campaign_id=pk) for pk in list(ids)]
