"""FLASK's own model-made metadata against what people verify, on the first 60 instances of
the real release (../shared/data/flask; skips without it): the release's labels are recorded
as the "dataset" proposal, a metadata run against the local server proposes labels that
differ on a known share, people accept the run's proposals, and the agreement of the
release's labels with the verified ones is exactly that share."""

from __future__ import annotations

import pytest

from analytics.metadata.selectors import metadata_agreement_for_dataset
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.metadata.selectors import item_metadata
from annotation.models import MetadataProposal, UploadSource, UploadStatus
from annotation.services.metadata import metadata_dataset_snapshot, metadata_verify
from devtools.openai_server import FakeOpenAIServer
from judging.models import MetadataRun, RunStatus
from judging.services.metadata import metadata_batch_range, metadata_run_create
from tests.judging.test_metadata_runs import llm_judge

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

ITEMS = 60


def test_the_releases_own_metadata_agrees_with_the_verified_where_the_run_agrees(
    project, flask_data, tmp_path, admin_user
):
    # given the first instances of the release, imported as they are
    head = tmp_path / "flask_head.jsonl"
    with open(flask_data / "flask_evaluation.jsonl") as source:
        head.write_text("".join(line for _, line in zip(range(ITEMS), source, strict=False)))
    upload = dataset_upload_create(
        project=project,
        dataset_name="FLASK head",
        source=UploadSource.CLI,
        files=[(FileSpec(head.name), str(head))],
        policies={
            "invalid_difficulty": "accept",
            "invalid_domain": "accept",
            "skill_count": "accept",
        },
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    dataset = upload.dataset
    own = {item.pk: item_metadata(item=item) for item in dataset.items.all()}
    complete = [pk for pk, m in own.items() if len(m["skills"]) == 3 and m["domains"]]
    # when the import has recorded the release's labels as the "dataset" proposal
    assert MetadataProposal.objects.filter(item__dataset=dataset, origin="dataset").count() == ITEMS
    assert metadata_dataset_snapshot(dataset=dataset) == 0  # the button finds nothing to do
    # and a run proposes the release's labels, wrong on purpose on about 30 % of them
    truth = {item.instruction: own[item.pk] for item in dataset.items.all()}
    with FakeOpenAIServer(style="json", metadata_truth=truth, metadata_wrong_rate=0.3) as srv:
        run = metadata_run_create(judge=llm_judge(project, srv), dataset=dataset)
        MetadataRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
        last = max(own)
        metadata_batch_range(run_id=run.pk, after_id=0, last_id=last)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    # and people accept the run's readable proposals of the complete items
    proposals = MetadataProposal.objects.filter(
        origin=f"run:{run.pk}", item_id__in=complete, status="ok"
    )
    same = 0
    for proposal in proposals:
        metadata_verify(proposal=proposal, verdict="accepted", user=admin_user)
        same += set(proposal.skills) == set(own[proposal.item_id]["skills"])
    # then the release's own labels agree with the verified ones exactly where the run did
    figures = {
        o.origin: o.figures["overall"] for o in metadata_agreement_for_dataset(dataset=dataset)
    }
    release = figures["dataset"]
    assert release["skills_n"] == proposals.count() > 40
    assert release["skills_exact"] == pytest.approx(same / proposals.count())
    assert 0.55 < release["skills_exact"] < 0.85
    assert release["difficulty_kappa_quadratic"] < 1.0
    # and the run's own proposals agree with themselves
    assert figures[f"run:{run.pk}"]["skills_exact"] == 1.0
