"""The verification page and API, the metadata run page and API, and the agreement page,
CSV and API (docs/METADATA.md)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from annotation.metadata.selectors import item_metadata
from annotation.models import Item, MetadataVerification
from annotation.services.metadata import (
    ProposalSpec,
    metadata_dataset_snapshot,
    metadata_proposals_record,
)
from judging.models import JudgeKind, MetadataRun, RunStatus
from judging.services import judge_config_create
from tests.annotation.test_assignments import make_dataset
from tests.judging.providers import llm_fields

SKILLS3 = ["factuality", "readability", "conciseness"]


@pytest.fixture
def dataset(project, tmp_path):
    dataset = make_dataset(project, tmp_path, items=3)
    specs = [
        ProposalSpec(item_id=pk, status="ok", domains=["math"], skills=SKILLS3, difficulty=4)
        for pk in dataset.items.order_by("pk").values_list("pk", flat=True)
    ]
    metadata_proposals_record(run_id=9, label="Meta <b>judge</b>", proposals=specs)
    return dataset


def page_url(dataset, **query):
    qs = "&".join(f"{k}={v}" for k, v in {"origin": "run:9", **query}.items())
    return f"/datasets/{dataset.pk}/metadata/?{qs}"


def first_proposal(dataset):
    return dataset.items.order_by("pk").first().metadata_proposals.get(origin="run:9")


def test_the_page_shows_the_first_unverified_proposal_and_htmx_gets_the_card(
    researcher_client, dataset
):
    response = researcher_client.get(page_url(dataset))
    assert response.status_code == 200
    body = response.content.decode()
    assert "<html" in body and "Item i0" in body
    assert "Meta &lt;b&gt;judge&lt;/b&gt;" in body  # a judge's name is text
    partial = researcher_client.get(
        page_url(dataset, item=first_proposal(dataset).item_id), HTTP_HX_REQUEST="true"
    )
    assert "<html" not in partial.content.decode()
    assert 'id="metadata-card"' in partial.content.decode()


def test_an_unknown_item_is_404_and_an_annotator_403(researcher_client, annotator_client, dataset):
    assert researcher_client.get(page_url(dataset, item="abc")).status_code == 404
    assert annotator_client.get(page_url(dataset)).status_code == 403


def test_accepting_by_htmx_swaps_in_the_next_item(researcher_client, dataset, researcher):
    proposal = first_proposal(dataset)
    response = researcher_client.post(
        f"/metadata/proposals/{proposal.pk}/verify/",
        {"verdict": "accepted"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "Item i1" in body and "accepted" in body
    assert "item=" in response["HX-Push-Url"]
    item = Item.objects.get(pk=proposal.item_id)
    assert item_metadata(item=item)["skills"] == SKILLS3
    assert MetadataVerification.objects.get().verified_by == researcher


def test_a_bad_edit_is_shown_with_its_reason_and_changes_nothing(researcher_client, dataset):
    proposal = first_proposal(dataset)
    before = item_metadata(item=proposal.item)
    response = researcher_client.post(
        f"/metadata/proposals/{proposal.pk}/verify/",
        {
            "verdict": "edited",
            "domain": "math",
            "skill_1": "factuality",
            "skill_2": "factuality",
            "skill_3": "readability",
            "difficulty": "3",
        },
    )
    assert response.status_code == 200
    assert "choose three different skills" in response.content.decode()
    assert item_metadata(item=Item.objects.get(pk=proposal.item_id)) == before
    assert not MetadataVerification.objects.exists()
    assert researcher_client.get(f"/metadata/proposals/{proposal.pk}/verify/").status_code == 405


def test_the_api_lists_and_verifies_proposals(researcher_client, dataset):
    listed = researcher_client.get(
        f"/api/v1/annotation/datasets/{dataset.pk}/metadata/proposals/?origin=run:9"
    ).json()
    assert listed["count"] == 3 and listed["results"][0]["verification"] is None
    proposal_id = listed["results"][0]["id"]
    url = f"/api/v1/annotation/metadata/proposals/{proposal_id}/verify/"
    bad = researcher_client.post(
        url,
        {"verdict": "edited", "domains": ["cooking"], "skills": SKILLS3, "difficulty": 2},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "unknown domain" in json.dumps(bad.json())
    good = researcher_client.post(
        url,
        {"verdict": "edited", "domains": ["math"], "skills": SKILLS3[::-1], "difficulty": 2},
        content_type="application/json",
    )
    assert good.status_code == 200 and good.json()["skills"] == SKILLS3[::-1]
    assert good.json()["verified_by"] == "rita"


def test_the_agreement_page_csv_and_api_compare_each_origin_with_the_verified(
    researcher_client, dataset, researcher
):
    # given the dataset's own metadata recorded, and two items verified against the run
    metadata_dataset_snapshot(dataset=dataset)
    first, second, _ = dataset.items.order_by("pk")
    url = "/metadata/proposals/{}/verify/"
    researcher_client.post(
        url.format(first.metadata_proposals.get(origin="run:9").pk), {"verdict": "accepted"}
    )
    researcher_client.post(
        url.format(second.metadata_proposals.get(origin="run:9").pk), {"verdict": "rejected"}
    )
    # then
    api = researcher_client.get(f"/api/v1/datasets/{dataset.pk}/metadata/agreement").json()
    by_origin = {row["origin"]: row for row in api}
    run = by_origin["run:9"]["overall"]
    assert run["items"] == 2 and run["skills_exact"] == 0.5
    assert by_origin["run:9"]["verdicts"] == {"accepted": 1, "rejected": 1}
    own = by_origin["dataset"]["overall"]
    assert own["items"] == 2 and own["skills_exact"] == 0.5  # the rejected item kept its own
    page = researcher_client.get(
        f"/datasets/{dataset.pk}/metadata/agreement/", HTTP_HX_REQUEST="true"
    )
    assert "<html" not in page.content.decode() and 'data-origin="run:9"' in page.content.decode()
    exported = researcher_client.get(f"/datasets/{dataset.pk}/metadata/agreement.csv")
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    overall = [r for r in rows if r["origin"] == "run:9" and r["group"] == "overall"]
    assert overall[0]["skills_exact"] == "0.5" and overall[0]["items"] == "2"


def test_a_metadata_run_is_created_and_started_from_its_page_and_the_api(
    researcher_client, project, dataset, django_capture_on_commit_callbacks
):
    judge = judge_config_create(
        project=project,
        name="Meta",
        kind=JudgeKind.LLM,
        model="m",
        **llm_fields("http://127.0.0.1:9/v1"),
    )
    form = researcher_client.get(f"/datasets/{dataset.pk}/metadata-runs/new/?judge={judge.pk}")
    assert form.status_code == 200 and b"data-estimate" in form.content
    with django_capture_on_commit_callbacks() as callbacks:
        created = researcher_client.post(
            f"/datasets/{dataset.pk}/metadata-runs/new/", {"judge": judge.pk}
        )
    run = MetadataRun.objects.get()
    assert created.status_code == 302 and created["Location"] == f"/metadata-runs/{run.pk}/"
    assert run.status == RunStatus.RUNNING and run.total == 3 and len(callbacks) == 1
    detail = researcher_client.get(f"/metadata-runs/{run.pk}/", HTTP_HX_REQUEST="true")
    assert detail.status_code == 200 and b"<html" not in detail.content
    paused = researcher_client.post(f"/metadata-runs/{run.pk}/action/", {"action": "pause"})
    assert paused.status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.PAUSED
    assert (
        researcher_client.get(f"/metadata-runs/{run.pk}/", HTTP_HX_REQUEST="true").status_code
        == 286
    )
    api = researcher_client.post(
        f"/api/v1/judging/datasets/{dataset.pk}/metadata-runs/",
        {"judge": judge.pk},
        content_type="application/json",
    )
    assert api.status_code == 201 and api.json()["status"] == "running"
    assert api.json()["template"] == "flask-metadata v1"
    refused = researcher_client.post(
        f"/api/v1/judging/datasets/{dataset.pk}/metadata-runs/",
        {"judge": 99999},
        content_type="application/json",
    )
    assert refused.status_code == 400
