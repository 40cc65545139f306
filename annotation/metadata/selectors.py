"""Reads of proposed and verified metadata: the project's catalogue as keys, the items a
metadata run asks about, the verification queue, the proposal/verified pairs the
agreement figures are computed from, and what a verification reaches beyond the item (the
campaigns that pinned it keep their pins)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from django.db.models import Prefetch, QuerySet

from annotation.models import (
    Campaign,
    CampaignItemPin,
    CampaignStatus,
    Dataset,
    GoldPreference,
    GoldScore,
    Item,
    ItemSkill,
    MetadataProposal,
    MetadataVerification,
    ProposalStatus,
    Skill,
    SkillMode,
)


def item_metadata(*, item: Item) -> dict:
    """An item's own metadata as keys: what judge prompts and campaigns read."""
    return {
        "domains": sorted(item.item_domains.values_list("domain__key", flat=True)),
        "skills": list(item.item_skills.order_by("rank").values_list("skill__key", flat=True)),
        "difficulty": item.difficulty,
    }


def metadata_queue(*, dataset: Dataset, origin: str, pending_only: bool = True) -> QuerySet:
    """The proposals of one origin in a dataset, by item, with the item and its latest
    verification; unverified items only unless `pending_only` is false."""
    proposals = MetadataProposal.objects.filter(item__dataset=dataset, origin=origin)
    if pending_only:
        # NOT IN (the dataset's verified items): one hashed subplan; a correlated NOT EXISTS
        # was planned as a nested loop (1.2 s on FLASK's 1,740 items with 1,000 verified)
        proposals = proposals.exclude(item_id__in=_verified_item_ids(dataset.pk))
    return proposals.select_related("item").order_by("item_id")


def _verified_item_ids(dataset_id: int) -> QuerySet:
    return MetadataVerification.objects.filter(item__dataset_id=dataset_id).values("item_id")


def metadata_proposal_get(*, pk: int) -> MetadataProposal:
    return MetadataProposal.objects.select_related("item__dataset__project").get(pk=pk)


def metadata_item_current(*, item: Item) -> Item:
    """The item with its skills and domains for the verification card."""
    return (
        Item.objects.prefetch_related(
            Prefetch("item_skills", queryset=ItemSkill.objects.select_related("skill")),
            "item_domains__domain",
        )
        .select_related("dataset__project")
        .get(pk=item.pk)
    )


def metadata_latest_verification(*, item_id: int) -> MetadataVerification | None:
    return (
        MetadataVerification.objects.filter(item_id=item_id)
        .select_related("verified_by")
        .order_by("-verified_at", "-id")
        .first()
    )


def metadata_counts(*, dataset_id: int, origin: str) -> dict:
    """Proposals of an origin by status, and how many of their items are verified."""
    proposals = MetadataProposal.objects.filter(item__dataset_id=dataset_id, origin=origin)
    verified = proposals.filter(item_id__in=_verified_item_ids(dataset_id))
    return {
        "proposals": proposals.count(),
        "parse_failed": proposals.exclude(status=ProposalStatus.OK).count(),
        "verified": verified.count(),
    }


def metadata_neighbours(*, dataset: Dataset, origin: str, item_id: int) -> dict:
    """The previous and next proposals of an origin around an item (any state), and the
    next unverified one after it (or the first unverified one). Two id lists, walked here:
    one pass whatever the dataset's size."""
    ids = list(
        MetadataProposal.objects.filter(item__dataset=dataset, origin=origin)
        .order_by("item_id")
        .values_list("item_id", flat=True)
    )
    verified = set(_verified_item_ids(dataset.pk).values_list("item_id", flat=True))
    at = bisect.bisect_left(ids, item_id)
    previous = ids[at - 1] if at > 0 else None
    following_at = at + 1 if at < len(ids) and ids[at] == item_id else at
    following = ids[following_at] if following_at < len(ids) else None
    pending = [i for i in ids if i not in verified and i != item_id]
    next_pending = next((i for i in pending if i > item_id), pending[0] if pending else None)
    return {"previous": previous, "next": following, "next_pending": next_pending}


# --- what a verification changes, and what it does not ------------------------------------------


@dataclass(frozen=True)
class PinnedCampaign:
    """A campaign that pinned the item's skills: it keeps asking them until a researcher
    applies the verified metadata to it."""

    campaign_id: int
    name: str
    status: str
    pinned: list[str]  # skill keys, most relevant first

    @property
    def running(self) -> bool:
        return self.status in (CampaignStatus.ACTIVE, CampaignStatus.PAUSED)


@dataclass(frozen=True)
class KnownOnItem:
    """A gold, attention, training or qualification task on the item, of a campaign that
    asks the item's own skills, with the skills its known answers name (keys)."""

    campaign_id: int
    campaign: str
    task_id: int
    kind: str
    skills: list[str]

    def dropped(self, skills: list[str]) -> list[str]:
        return [key for key in self.skills if key not in skills]


@dataclass(frozen=True)
class VerificationEffects:
    """What verifying an item changes beyond the item itself: the campaigns that pinned it
    (running ones keep their pins; finished ones keep what they asked), the draft campaigns
    of its dataset (they read the item's own metadata when activated), and the known-answer
    tasks on the item in those drafts and running campaigns: one whose known skills the new
    skills drop blocks a draft's activation, or holds the item back when the verified
    metadata is applied to a running campaign, until its known answers are set again."""

    pinned: list[PinnedCampaign]
    drafts: list[tuple[int, str]]
    known: list[KnownOnItem]

    @property
    def running(self) -> list[PinnedCampaign]:
        return [c for c in self.pinned if c.running]

    @property
    def finished(self) -> list[PinnedCampaign]:
        return [c for c in self.pinned if not c.running]

    def conflicts(self, skills: list[str], *, campaign_ids) -> list[tuple[KnownOnItem, list[str]]]:
        """(task, the known skills `skills` drop) of the known-answer tasks of the campaigns
        `campaign_ids` whose known skills are not all among `skills` (keys)."""
        wanted = set(campaign_ids)
        return [
            (task, dropped)
            for task in self.known
            if task.campaign_id in wanted and (dropped := task.dropped(skills))
        ]


def metadata_verification_effects(*, item: Item) -> VerificationEffects:
    """What verifying `item` reaches and what it does not (VerificationEffects). Five
    queries."""
    rows = list(
        CampaignItemPin.objects.filter(item=item)
        .exclude(campaign__status=CampaignStatus.DRAFT)
        .order_by("campaign__name")
        .values_list("campaign_id", "campaign__name", "campaign__status", "skills")
    )
    keys = dict(
        Skill.objects.filter(pk__in={pair[0] for row in rows for pair in row[3]}).values_list(
            "pk", "key"
        )
    )
    pinned = [
        PinnedCampaign(
            campaign_id=campaign_id,
            name=name,
            status=status,
            pinned=[keys.get(pair[0], str(pair[0])) for pair in skills],
        )
        for campaign_id, name, status, skills in rows
    ]
    drafts = list(
        Campaign.objects.filter(dataset_id=item.dataset_id, status=CampaignStatus.DRAFT)
        .order_by("name")
        .values_list("pk", "name")
    )
    watched = [pk for pk, _ in drafts] + [c.campaign_id for c in pinned if c.running]
    known: dict[int, KnownOnItem] = {}
    for model in (GoldScore, GoldPreference) if watched else ():
        found = (
            model.objects.filter(
                task__campaign_id__in=watched,
                task__campaign__skill_mode=SkillMode.ITEM,
                task__response__item=item,
                skill__isnull=False,
            )
            .order_by("task_id", "skill__order")
            .values_list(
                "task__campaign_id", "task__campaign__name", "task_id", "task__kind", "skill__key"
            )
        )
        for campaign_id, campaign, task_id, kind, key in found:
            known.setdefault(
                task_id, KnownOnItem(campaign_id, campaign, task_id, kind, [])
            ).skills.append(key)
    return VerificationEffects(pinned=pinned, drafts=drafts, known=list(known.values()))
