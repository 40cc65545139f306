"""Writes of proposed and verified metadata.

- `metadata_proposals_record` stores proposals (a metadata run's answers) by upsert on
  (item, origin), so a redelivered batch writes nothing twice.
- `metadata_dataset_snapshot` records a dataset's own metadata as its "dataset" proposals
  (annotation.services.items: the dataset importer calls it too, inside its transaction).
- `metadata_verify` is a person's check of one proposal: it writes the item's skills,
  domains and difficulty in one transaction, under the item's row lock, and keeps what the
  item had before on the verification row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.metadata.selectors import item_metadata
from annotation.models import (
    Item,
    ItemDomain,
    ItemSkill,
    MetadataProposal,
    MetadataVerification,
    ProposalSource,
    ProposalStatus,
    VerificationVerdict,
)
from annotation.selectors import (
    domain_list_for_project,
    metadata_catalogue,
    skill_list_for_project,
)
from annotation.services.items import DATASET_ORIGIN, metadata_dataset_snapshot

__all__ = [
    "DATASET_ORIGIN",
    "ProposalSpec",
    "metadata_dataset_snapshot",
    "metadata_proposals_record",
    "metadata_verify",
    "run_origin",
]


def run_origin(run_id: int) -> str:
    return f"run:{run_id}"


@dataclass(frozen=True)
class ProposalSpec:
    item_id: int
    status: str
    domains: Sequence[str] = field(default_factory=list)
    skills: Sequence[str] = field(default_factory=list)
    difficulty: int | None = None
    raw_output: str = ""
    error: str = ""


def metadata_proposals_record(*, run_id: int, label: str, proposals: Sequence[ProposalSpec]) -> int:
    """Store a metadata run's proposals; an item that already holds this run's proposal
    keeps it (a duplicated batch inserts nothing). The caller filters with
    annotation.selectors.metadata_proposal_items_present under its run's lock, so the
    count returned (the proposals given) is what was inserted."""
    if not proposals:
        return 0
    origin = run_origin(run_id)
    MetadataProposal.objects.bulk_create(
        [
            MetadataProposal(
                item_id=spec.item_id,
                origin=origin,
                source=ProposalSource.MODEL,
                run_id=run_id,
                label=label[:200],
                status=spec.status,
                domains=list(spec.domains),
                skills=list(spec.skills),
                difficulty=spec.difficulty,
                raw_output=spec.raw_output,
                error=spec.error[:2000],
            )
            for spec in proposals
        ],
        ignore_conflicts=True,
    )
    return len(proposals)


def _checked_values(
    *, item: Item, domains: Sequence[str], skills: Sequence[str], difficulty: int | None
) -> tuple[list[str], list[str], int]:
    catalogue = metadata_catalogue(project=item.dataset.project)
    domains, skills = [str(d) for d in domains], [str(s) for s in skills]
    problems = []
    unknown = [d for d in domains if d not in catalogue.domain_keys]
    if not domains:
        problems.append("choose a domain")
    elif unknown:
        problems.append(f"unknown domain {unknown[0]!r}")
    elif len(set(domains)) != len(domains):
        problems.append("a domain is listed twice")
    unknown = [s for s in skills if s not in catalogue.skill_keys]
    if unknown:
        problems.append(f"unknown skill {unknown[0]!r}")
    elif len(skills) != 3 or len(set(skills)) != 3:
        problems.append("choose three different skills")
    if isinstance(difficulty, bool) or not isinstance(difficulty, int) or not 1 <= difficulty <= 5:
        problems.append("difficulty must be a level 1-5")
    if problems:
        raise ValidationError("; ".join(problems))
    return domains, skills, difficulty  # type: ignore[return-value]


def _write_item(item: Item, domains: list[str], skills: list[str], difficulty: int) -> None:
    project = item.dataset.project
    skill_ids = dict(skill_list_for_project(project=project).values_list("key", "pk"))
    domain_ids = dict(domain_list_for_project(project=project).values_list("key", "pk"))
    # a skill the item keeps keeps its checklist
    checklists = dict(ItemSkill.objects.filter(item=item).values_list("skill__key", "checklist"))
    ItemSkill.objects.filter(item=item).delete()
    ItemSkill.objects.bulk_create(
        [
            ItemSkill(
                item=item, skill_id=skill_ids[key], rank=rank, checklist=checklists.get(key, [])
            )
            for rank, key in enumerate(skills, start=1)
        ]
    )
    ItemDomain.objects.filter(item=item).delete()
    ItemDomain.objects.bulk_create(
        [ItemDomain(item=item, domain_id=domain_ids[k]) for k in domains]
    )
    Item.objects.filter(pk=item.pk).update(difficulty=difficulty)


@transaction.atomic(durable=True)
def metadata_verify(
    *,
    proposal: MetadataProposal,
    verdict: str,
    user,
    domains: Sequence[str] | None = None,
    skills: Sequence[str] | None = None,
    difficulty: int | None = None,
) -> MetadataVerification:
    """A person's check of `proposal`: accepted (the proposal's values become the item's),
    edited (`domains`, `skills` and `difficulty` do) or rejected (the item keeps its own).
    Raises ValidationError, changing nothing, for an unknown verdict, a parse-failed
    proposal accepted, or edited values outside the project's catalogue."""
    item = (
        Item.objects.select_for_update().select_related("dataset__project").get(pk=proposal.item_id)
    )
    previous = item_metadata(item=item)
    if verdict == VerificationVerdict.ACCEPTED:
        if proposal.status != ProposalStatus.OK:
            raise ValidationError("a proposal that could not be read cannot be accepted; edit it")
        values = _checked_values(
            item=item,
            domains=proposal.domains,
            skills=proposal.skills,
            difficulty=proposal.difficulty,
        )
    elif verdict == VerificationVerdict.EDITED:
        values = _checked_values(
            item=item, domains=domains or [], skills=skills or [], difficulty=difficulty
        )
    elif verdict == VerificationVerdict.REJECTED:
        values = (previous["domains"], previous["skills"], previous["difficulty"])
    else:
        raise ValidationError(f"unknown verdict {verdict!r}")
    if verdict != VerificationVerdict.REJECTED:
        _write_item(item, *values)
    return MetadataVerification.objects.create(
        item=item,
        proposal=proposal,
        verdict=verdict,
        domains=list(values[0]),
        skills=list(values[1]),
        difficulty=values[2],
        previous=previous,
        verified_by=user if getattr(user, "is_authenticated", False) else None,
    )
