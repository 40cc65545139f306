"""Items and responses made by other importers than the dataset importer: a score file
(analytics.imports) may name items and responses the project does not hold yet. The
annotation app owns these tables, so the rows are written here.

An item known only by its id is stored with an empty instruction; a later import that has
the text fills it in (`item_texts_fill`), as it does an empty response text."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from django.db import transaction

from annotation.models import (
    Dataset,
    Item,
    ItemDomain,
    ItemSkill,
    MetadataProposal,
    Project,
    ProposalSource,
    ProposalStatus,
    Response,
)
from annotation.names import NameRefused, NameScope, name_clean

BATCH = 5000
#: The origin of the proposals that hold a dataset's own metadata (docs/METADATA.md).
DATASET_ORIGIN = "dataset"


@dataclass(frozen=True)
class ItemSpec:
    external_id: str
    instruction: str = ""
    reference_answer: str = ""
    difficulty: int | None = None
    domain_ids: Sequence[int] = field(default_factory=tuple)


def _batches(values: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def dataset_name_check(*, project: Project, name: str) -> str:
    """A dataset name as every importer takes it: cleaned by annotation.names (NFKC, no
    invisible or control characters) and not a look-alike of another dataset of the
    project (the same name is the same dataset). Raises NameRefused with the reason."""
    name = name_clean(name, what="the dataset name")
    existing = Dataset.objects.filter(project=project).values_list("name", flat=True)
    why = NameScope("dataset", existing).check(name)
    if why is not None:
        raise NameRefused(why)
    return name


def dataset_get_or_create(*, project: Project, name: str) -> tuple[Dataset, bool]:
    existing = Dataset.objects.filter(project=project, name=name).first()
    if existing is not None:
        return existing, False
    dataset = Dataset(project=project, name=name)
    dataset.full_clean(validate_constraints=False)
    dataset.save()
    return dataset, True


@transaction.atomic
def items_create(
    *, dataset: Dataset, items: Sequence[ItemSpec], batch: int = BATCH
) -> dict[str, int]:
    """Create the items (and their domain links); returns external id -> new pk."""
    created: dict[str, int] = {}
    for chunk in _batches(items, batch):
        rows = [
            Item(
                dataset=dataset,
                external_id=spec.external_id,
                instruction=spec.instruction,
                reference_answer=spec.reference_answer,
                difficulty=spec.difficulty,
            )
            for spec in chunk
        ]
        Item.objects.bulk_create(rows)
        links = []
        for spec, row in zip(chunk, rows, strict=True):
            created[spec.external_id] = row.pk
            links += [ItemDomain(item_id=row.pk, domain_id=d) for d in spec.domain_ids]
        ItemDomain.objects.bulk_create(links)
    return created


@transaction.atomic
def responses_create(*, responses: Sequence[tuple[int, str, str]], batch: int = BATCH) -> list[int]:
    """Create responses given as (item pk, model name, text); returns their pks in order."""
    created: list[int] = []
    for chunk in _batches(responses, batch):
        rows = [Response(item_id=item, model_name=model, text=text) for item, model, text in chunk]
        Response.objects.bulk_create(rows)
        created += [row.pk for row in rows]
    return created


@transaction.atomic
def texts_fill(*, items: Mapping[int, Mapping[str, str]], responses: Mapping[int, str]) -> None:
    """Fill in texts stored empty: items' `instruction` / `reference_answer` by pk, and
    responses' text by pk. The caller has checked that they are empty."""
    allowed = {"instruction", "reference_answer"}
    for pk, columns in items.items():
        if set(columns) - allowed:
            raise ValueError(f"only {', '.join(sorted(allowed))} can be filled in")
        Item.objects.filter(pk=pk).update(**columns)
    for pk, text in responses.items():
        Response.objects.filter(pk=pk).update(text=text)


@transaction.atomic
def metadata_dataset_snapshot(
    *, dataset: Dataset, upload_id: int | None = None, batch: int = BATCH
) -> int:
    """Record each item's current metadata (ranked skills, domains, difficulty) as its
    "dataset" proposal (the metadata that came with the import, e.g. FLASK's model-made
    labels), for items that carry any and have no dataset proposal yet: a second snapshot,
    after people verified items, never replaces the imported values with the verified ones.
    `upload_id`: only the items that dataset import created (the importer calls it inside
    its transaction). Idempotent (the proposal is unique per item and origin); in batches of
    `batch` items, so memory does not grow with the dataset. Returns how many were
    recorded. Lives here, not in annotation.metadata, because the dataset importer and the
    metadata pages both call it and those features do not import each other."""
    items = Item.objects.filter(dataset=dataset).exclude(metadata_proposals__origin=DATASET_ORIGIN)
    if upload_id is not None:
        items = items.filter(upload_id=upload_id)
    recorded, after = 0, 0
    while page := list(
        items.filter(pk__gt=after).order_by("pk").values_list("pk", "difficulty")[:batch]
    ):
        after = page[-1][0]
        ids = [pk for pk, _ in page]
        skills: dict[int, list[str]] = {}
        for item_id, key in (
            ItemSkill.objects.filter(item_id__in=ids)
            .order_by("item_id", "rank")
            .values_list("item_id", "skill__key")
        ):
            skills.setdefault(item_id, []).append(key)
        domains: dict[int, list[str]] = {}
        for item_id, key in (
            ItemDomain.objects.filter(item_id__in=ids)
            .order_by("item_id", "domain__order", "domain__name")
            .values_list("item_id", "domain__key")
        ):
            domains.setdefault(item_id, []).append(key)
        rows = [
            MetadataProposal(
                item_id=item_id,
                origin=DATASET_ORIGIN,
                source=ProposalSource.DATASET,
                label="dataset",
                status=ProposalStatus.OK,
                domains=domains.get(item_id, []),
                skills=skills.get(item_id, []),
                difficulty=difficulty,
            )
            for item_id, difficulty in page
            if item_id in skills or item_id in domains or difficulty is not None
        ]
        MetadataProposal.objects.bulk_create(rows, ignore_conflicts=True)
        recorded += len(rows)
    return recorded
