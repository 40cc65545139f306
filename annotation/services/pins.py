"""Pinned item skills: what a campaign's tasks ask of each item, fixed when the campaign is
activated (or when an item's first task is added to a running campaign), and changed only
when a researcher applies an item's verified metadata to a running campaign (docs/CAMPAIGNS.md,
"Pinned skills"; docs/METADATA.md). The claim and the submission read the pins in the
statements they already run (annotation.selectors.item_skills_sql).

Lock order of `campaign_metadata_apply`: the campaign row, then the items by id, as
annotation.metadata.services.metadata_verify locks one item: a verification of a listed
item waits for the apply, or the apply sees it (and finds its plan stale)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.models import (
    Campaign,
    CampaignItemPin,
    CampaignRubric,
    CampaignStatus,
    Item,
    ItemSkill,
    Task,
)
from annotation.selectors import MetadataApplyPlan, campaign_metadata_plan

#: Pins written per INSERT (a few hundred bytes each with checklists).
PIN_BATCH = 2000


def items_pin(*, campaign: Campaign, item_ids=None) -> int:
    """Pin the item skills (ranked, with their checklists) of the items `item_ids`, or of
    every item a task of the campaign is on, that the campaign has not pinned yet: from then
    on its tasks on them ask those, whatever the item's metadata becomes (a verified change
    reaches the campaign through `campaign_metadata_apply`). Called by activation, and when
    a task is added to a campaign that is not a draft (a draft pins nothing: it reads the
    items' own skills), inside the transaction that adds the tasks. Returns the number of
    items pinned."""
    if item_ids is None:
        tasks = Task.objects.filter(campaign=campaign).order_by()
        wanted = set(tasks.values_list("response__item_id", flat=True).distinct())
    else:
        wanted = set(item_ids)
    wanted -= set(
        CampaignItemPin.objects.filter(campaign=campaign).values_list("item_id", flat=True)
    )
    ordered = sorted(wanted)
    for start in range(0, len(ordered), PIN_BATCH):
        chunk = ordered[start : start + PIN_BATCH]
        skills: dict[int, list] = {item_id: [] for item_id in chunk}
        for item_id, skill_id, checklist in (
            ItemSkill.objects.filter(item_id__in=chunk)
            .order_by("item_id", "rank")
            .values_list("item_id", "skill_id", "checklist")
        ):
            skills[item_id].append([skill_id, checklist])
        CampaignItemPin.objects.bulk_create(
            [
                CampaignItemPin(campaign=campaign, item_id=item_id, skills=pairs)
                for item_id, pairs in skills.items()
            ],
            ignore_conflicts=True,  # pinned concurrently (a gold task set while activating)
        )
    return len(ordered)


# --- applying verified metadata to a running campaign ----------------------------------------


class MetadataApplyRefused(ValidationError):
    """The campaign is not running (a draft reads its items' own metadata when activated; a
    finished campaign keeps what it asked)."""


class MetadataPlanStale(ValidationError):
    """The verified metadata, or what it would change, is not what the researcher was shown
    (an item was verified again, a gold task changed): nothing was applied; list it again."""


@transaction.atomic
def campaign_metadata_apply(
    *, campaign: Campaign, fingerprint: str, item_ids=None, user=None
) -> MetadataApplyPlan:
    """Apply the verified metadata of the items a running (active or paused) campaign
    pinned, as `campaign_metadata_plan` lists it (of `item_ids` only, if given): every item
    the plan can apply has its pin replaced by the item's own skills and checklists (with
    the verification applied and who applied it), skills asked from now on get the rubric
    in force pinned, and the campaign's `updated_at` moves (the process caches of pins
    follow). Items the plan holds back are left as they are. All or nothing, and only the
    plan the researcher saw: `fingerprint` is its MetadataApplyPlan.fingerprint, and a
    plan that changed since raises MetadataPlanStale with nothing written.

    Annotations already submitted keep the skills they were given under; leases held now are
    checked at submission against the skills asked then. The campaign row, then the items
    (ordered by id) are locked, so a verification of one of the items waits for the apply
    or the apply sees it. Returns the plan applied."""
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if campaign.status not in (CampaignStatus.ACTIVE, CampaignStatus.PAUSED):
        raise MetadataApplyRefused(
            "verified metadata is applied to a running campaign; a draft reads the items' own "
            f"metadata when it is activated, and a finished one keeps what it asked (this one "
            f"is {campaign.status})"
        )
    listed = campaign_metadata_plan(campaign=campaign, item_ids=item_ids)
    list(
        Item.objects.select_for_update()
        .filter(pk__in=[c.item_id for c in listed.changes])
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    plan = campaign_metadata_plan(campaign=campaign, item_ids=item_ids)
    if plan.fingerprint != fingerprint:
        raise MetadataPlanStale(
            "the verified metadata or what it affects changed since it was listed; nothing "
            "was applied: look at the list again"
        )
    if not plan.applicable:
        raise ValidationError("nothing to apply: no listed item can be applied")
    now = timezone.now()
    applied_by = user if getattr(user, "is_authenticated", False) else None
    for change in plan.applicable:
        CampaignItemPin.objects.filter(campaign=campaign, item_id=change.item_id).update(
            skills=change.verified,
            verification_id=change.verification_id,
            applied_by=applied_by,
            updated_at=now,
        )
    CampaignRubric.objects.bulk_create(
        CampaignRubric(campaign=campaign, skill_id=skill_id, rubric_id=rubric_id)
        for skill_id, rubric_id in plan.new_rubric_ids.items()
    )
    Campaign.objects.filter(pk=campaign.pk).update(updated_at=now)
    return plan
