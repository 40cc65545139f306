"""The metadata services other apps call (a metadata run records its proposals here)."""

from annotation.metadata.services import (
    DATASET_ORIGIN,
    ProposalSpec,
    metadata_dataset_snapshot,
    metadata_proposals_record,
    metadata_verify,
    run_origin,
)

__all__ = [
    "DATASET_ORIGIN",
    "ProposalSpec",
    "metadata_dataset_snapshot",
    "metadata_proposals_record",
    "metadata_verify",
    "run_origin",
]
