"""A metadata batch keeps the answers it paid for when its database connection is lost while
it writes them (judging/services/metadata.py, flaskweb/infra.py): they are written once the
database answers again, and no call is made twice. The connection is really lost
(tests/annotation/test_task_db_loss.py, `connection_lost_once`); the batch runs in this
process as a worker runs it, against the local OpenAI-compatible server over HTTP."""

from __future__ import annotations

import pytest

from annotation.models import MetadataProposal, ProposalStatus
from devtools.openai_server import FakeOpenAIServer
from judging.models import MetadataRun, RunStatus
from judging.services.metadata import metadata_run_create
from judging.tasks import metadata_batch_task
from tests.annotation.test_task_db_loss import connection_lost_once, statements_seen
from tests.judging.test_metadata_runs import demo_dataset, llm_judge, running

# a transactional test (the lost connection is this process's own): its teardown empties
# every table, which takes seconds
pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]


def test_answers_that_come_back_while_the_database_is_away_are_written_when_it_is_back(
    transactional_db, project
):
    # given a running metadata run over the 16 demo items, answered in 0.2 s each
    dataset = demo_dataset(project)
    with FakeOpenAIServer(style="json", latency=0.2) as srv:
        run = running(metadata_run_create(judge=llm_judge(project, srv), dataset=dataset))
        ids = sorted(dataset.items.values_list("pk", flat=True))
        # when the connection is lost by the batch's first write of proposals (the calls
        # answered, the answers paid for)
        with connection_lost_once("annotation_metadataproposal") as lost:
            metadata_batch_task(run.pk, 0, ids[-1])
            assert statements_seen(lost) >= 2
        stats = srv.stats()
    # then every item has its one proposal, each from its own call: none made twice
    run = MetadataRun.objects.get(pk=run.pk)
    assert run.status == RunStatus.DONE and (run.done, run.failed) == (16, 0)
    proposals = MetadataProposal.objects.filter(origin=f"run:{run.pk}")
    assert proposals.count() == 16
    assert set(proposals.values_list("status", flat=True)) == {ProposalStatus.OK}
    assert stats["completions"] == 16 and run.cached == 0
