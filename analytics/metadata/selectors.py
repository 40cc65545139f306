"""The agreement figures of a dataset's metadata proposals with what people verified, per
proposal origin (a metadata run, or the dataset's own metadata). Computed on request: one
pass over the dataset's verified items (FLASK's 1,700 items take milliseconds), with the
statistics in analytics.metadata_agreement."""

from __future__ import annotations

from dataclasses import dataclass

from analytics.metadata_agreement import MetadataPair, metadata_agreement
from annotation.models import Dataset
from annotation.selectors import metadata_origins, metadata_pair_rows


@dataclass(frozen=True)
class OriginAgreement:
    origin: str
    label: str
    figures: dict  # {"overall": {...}, "per_domain": {domain key: {...}}}
    verdicts: dict[str, int]


def metadata_agreement_for_dataset(*, dataset: Dataset) -> list[OriginAgreement]:
    """Every origin's agreement with the verified metadata, the dataset's own first."""
    result = []
    for origin, label, _ in metadata_origins(dataset=dataset):
        rows = metadata_pair_rows(dataset_id=dataset.pk, origin=origin)
        pairs = [
            MetadataPair(
                item_id=row["item_id"],
                proposed_domains=row["proposed"]["domains"],
                proposed_skills=row["proposed"]["skills"],
                proposed_difficulty=row["proposed"]["difficulty"],
                verified_domains=row["verified"]["domains"],
                verified_skills=row["verified"]["skills"],
                verified_difficulty=row["verified"]["difficulty"],
            )
            for row in rows
        ]
        verdicts: dict[str, int] = {}
        for row in rows:
            verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
        result.append(
            OriginAgreement(
                origin=origin,
                label="the dataset's own metadata" if origin == "dataset" else label,
                figures=metadata_agreement(pairs),
                verdicts=verdicts,
            )
        )
    return result
