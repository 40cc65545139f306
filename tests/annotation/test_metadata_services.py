"""Proposals and their verification: the dataset's own metadata as a proposal, accept, edit
and reject writing the item's metadata atomically with who and when, and what judge prompts
read afterwards."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.metadata.selectors import item_metadata
from annotation.models import (
    Item,
    MetadataProposal,
    MetadataVerification,
    ProposalSource,
    ProposalStatus,
    UploadSource,
    UploadStatus,
)
from annotation.selectors import metadata_pair_rows, skills_for_response
from annotation.services.metadata import (
    ProposalSpec,
    metadata_dataset_snapshot,
    metadata_proposals_record,
    metadata_verify,
)
from tests.annotation.test_assignments import SKILLS, make_dataset

SKILLS3 = ["factuality", "readability", "conciseness"]


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path, items=2)


def proposal(item, **values):
    spec = ProposalSpec(
        item_id=item.pk,
        status=values.pop("status", ProposalStatus.OK),
        domains=values.pop("domains", ["coding"]),
        skills=values.pop("skills", SKILLS3),
        difficulty=values.pop("difficulty", 4),
        raw_output=values.pop("raw_output", "{}"),
    )
    metadata_proposals_record(run_id=7, label="Meta", proposals=[spec])
    return MetadataProposal.objects.get(item=item, origin="run:7")


def test_the_datasets_own_metadata_is_recorded_by_the_import_once(dataset):
    # given: a dataset imported with its items' domains, skills and difficulty (make_dataset)
    item = dataset.items.first()
    own = item_metadata(item=item)

    # then: the import recorded them as the "dataset" proposals, without a manual step
    assert MetadataProposal.objects.filter(item__dataset=dataset, origin="dataset").count() == 2
    row = MetadataProposal.objects.get(item=item, origin="dataset")
    assert row.source == ProposalSource.DATASET and row.status == ProposalStatus.OK
    assert (row.domains, row.skills, row.difficulty) == (
        own["domains"],
        own["skills"],
        own["difficulty"],
    )
    assert dataset.uploads.get().summary["metadata_proposals"] == 2
    # the button and the command stay: nothing to record, and never a replacement
    assert metadata_dataset_snapshot(dataset=dataset) == 0
    MetadataProposal.objects.filter(origin="dataset").delete()
    assert metadata_dataset_snapshot(dataset=dataset, batch=1) == 2
    assert metadata_dataset_snapshot(dataset=dataset) == 0
    assert MetadataProposal.objects.get(item=item, origin="dataset").skills == own["skills"]


def _import(project, path, name="D"):
    upload = dataset_upload_create(
        project=project,
        dataset_name=name,
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    return dataset_import(upload_id=upload.pk)


def test_an_import_records_only_its_new_items_and_a_rejected_one_nothing(project, tmp_path):
    rows = [
        {
            "id": "a",
            "instruction": "Q a",
            "skills": SKILLS,
            "domains": ["History"],
            "difficulty": 3,
            "responses": [{"model": "m1", "text": "x"}],
        },
        {
            "id": "b",
            "instruction": "Q b",
            "skills": SKILLS,
            "responses": [{"model": "m1", "text": "y"}],
        },
    ]
    path = tmp_path / "meta.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    first = _import(project, path)
    assert first.status == UploadStatus.SUCCEEDED, first.summary
    proposals = MetadataProposal.objects.filter(item__dataset=first.dataset, origin="dataset")
    assert sorted(proposals.values_list("item__external_id", "difficulty")) == [
        ("a", 3),
        ("b", None),
    ]
    assert proposals.get(item__external_id="b").domains == []
    # the same file again: no new item, no new proposal
    again = _import(project, path)
    assert again.status == UploadStatus.SUCCEEDED and "metadata_proposals" not in again.summary
    assert proposals.count() == 2
    # a rejected import (a broken line) writes no item and no proposal
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**rows[0], "id": "c"}) + "\n{not json\n")
    rejected = _import(project, bad)
    assert rejected.status == UploadStatus.REJECTED
    assert MetadataProposal.objects.filter(origin="dataset").count() == 2
    assert not Item.objects.filter(external_id="c").exists()


def test_accepting_writes_the_proposal_into_the_item_and_keeps_what_was_there(dataset, admin_user):
    item = dataset.items.first()
    before = item_metadata(item=item)
    p = proposal(item)
    verification = metadata_verify(proposal=p, verdict="accepted", user=admin_user)
    assert item_metadata(item=Item.objects.get(pk=item.pk)) == {
        "domains": ["coding"],
        "skills": SKILLS3,
        "difficulty": 4,
    }
    assert verification.previous == before
    assert verification.verified_by == admin_user and verification.verified_at is not None
    # the proposal is kept as it was
    p.refresh_from_db()
    assert p.skills == SKILLS3
    # judge prompts and campaigns read the item's own (now verified) skills
    response = item.responses.first()
    names = [s.name for s in skills_for_response(response=response, campaign=None)]
    assert names == ["Factuality", "Readability", "Conciseness"]


def test_editing_writes_the_persons_values_and_rejecting_keeps_the_items(dataset, admin_user):
    first, second = dataset.items.order_by("pk")
    metadata_verify(
        proposal=proposal(first),
        verdict="edited",
        user=admin_user,
        domains=["math"],
        skills=["readability", "factuality", "comprehension"],
        difficulty=2,
    )
    assert item_metadata(item=Item.objects.get(pk=first.pk))["skills"] == [
        "readability",
        "factuality",
        "comprehension",
    ]
    before = item_metadata(item=second)
    rejected = metadata_verify(proposal=proposal(second), verdict="rejected", user=admin_user)
    assert item_metadata(item=Item.objects.get(pk=second.pk)) == before
    assert rejected.skills == before["skills"] and rejected.previous == before
    rows = metadata_pair_rows(dataset_id=dataset.pk, origin="run:7")
    assert {r["verdict"] for r in rows} == {"edited", "rejected"}


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"domains": ["cooking"]}, "unknown domain 'cooking'"),
        ({"skills": ["factuality", "humor", "readability"]}, "unknown skill 'humor'"),
        ({"skills": ["factuality", "factuality", "readability"]}, "three different skills"),
        ({"difficulty": 0}, "difficulty must be a level 1-5"),
        ({"domains": []}, "choose a domain"),
    ],
)
def test_bad_edits_are_refused_and_change_nothing(dataset, admin_user, values, error):
    item = dataset.items.first()
    before = item_metadata(item=item)
    edit = {"domains": ["math"], "skills": SKILLS3, "difficulty": 3, **values}
    with pytest.raises(ValidationError, match=error):
        metadata_verify(proposal=proposal(item), verdict="edited", user=admin_user, **edit)
    assert item_metadata(item=Item.objects.get(pk=item.pk)) == before
    assert not MetadataVerification.objects.exists()


def test_a_parse_failed_proposal_cannot_be_accepted(dataset, admin_user):
    item = dataset.items.first()
    p = proposal(item, status=ProposalStatus.PARSE_FAILED, skills=[], domains=[], difficulty=None)
    with pytest.raises(ValidationError, match="cannot be accepted"):
        metadata_verify(proposal=p, verdict="accepted", user=admin_user)
    with pytest.raises(ValidationError, match="unknown verdict"):
        metadata_verify(proposal=p, verdict="maybe", user=admin_user)
    assert not MetadataVerification.objects.exists()


def test_a_campaign_made_after_verification_scores_the_verified_skills(
    project, dataset, admin_user
):
    item = dataset.items.order_by("pk").first()
    metadata_verify(proposal=proposal(item), verdict="accepted", user=admin_user)
    campaign = campaign_create(project=project, dataset=dataset, name="After", overlap=1)
    campaign_activate(campaign=campaign)
    response = item.responses.first()
    names = [s.name for s in skills_for_response(response=response, campaign=campaign)]
    assert names == ["Factuality", "Readability", "Conciseness"]
