"""Reads of proposed and verified metadata: the project's catalogue as keys, the items a
metadata run asks about, the verification queue, and the proposal/verified pairs the
agreement figures are computed from."""

from __future__ import annotations

import bisect

from django.db.models import Prefetch, QuerySet

from annotation.models import (
    Dataset,
    Item,
    ItemSkill,
    MetadataProposal,
    MetadataVerification,
    ProposalStatus,
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
