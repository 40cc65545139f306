"""Metadata runs on the demo dataset against the project's local OpenAI-compatible server
(real HTTP on 127.0.0.1): proposals as the server answers, parse failures kept raw, the
budget cap, the cache on a rerun, and a run end to end through a real Celery worker."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.metadata.selectors import item_metadata
from annotation.models import (
    Item,
    MetadataProposal,
    ProposalSource,
    ProposalStatus,
    UploadSource,
    UploadStatus,
)
from devtools.openai_server import FakeOpenAIServer
from judging.models import JudgeKind, LLMCacheEntry, MetadataRun, RunStatus
from judging.prompts import metadata as metadata_prompt
from judging.services import judge_config_create
from judging.services.metadata import (
    metadata_batch_range,
    metadata_prompt_template,
    metadata_run_create,
    metadata_run_start,
    metadata_runs_redispatch_stalled,
)
from tests.conftest import wait_for
from tests.judging.providers import llm_fields

DEMO = Path(__file__).resolve().parents[2] / "annotation" / "demo" / "demo_dataset.jsonl"


def demo_dataset(project, name="Demo"):
    upload = dataset_upload_create(
        project=project,
        dataset_name=name,
        source=UploadSource.CLI,
        files=[(FileSpec(DEMO.name), str(DEMO))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload.dataset


def truth_of(dataset):
    """Each demo item's own metadata, keyed by instruction: what the server is told."""
    return {item.instruction: item_metadata(item=item) for item in dataset.items.all()}


def llm_judge(project, server, **extra):
    fields = {**llm_fields(server.url), "model": "fake-judge", "use_reference": False}
    fields.update(extra)
    return judge_config_create(
        project=project, name=extra.pop("name", "Meta"), kind=JudgeKind.LLM, **fields
    )


def running(run):
    MetadataRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    run.refresh_from_db()
    return run


def run_all(run):
    ids = sorted(run.dataset.items.values_list("pk", flat=True))
    return metadata_batch_range(run_id=run.pk, after_id=0, last_id=ids[-1])


@pytest.fixture
def server():
    with FakeOpenAIServer(style="json") as srv:
        yield srv


def test_a_run_proposes_what_the_server_answers_for_every_demo_item(project, server):
    # given the server told the demo items' own metadata, wrong on 25 % of them
    dataset = demo_dataset(project)
    truth = truth_of(dataset)
    server.configure(metadata_truth=truth, metadata_wrong_rate=0.25)
    judge = llm_judge(project, server)
    run = metadata_run_create(judge=judge, dataset=dataset)
    assert run.total == 16 and run.estimate["calls"] == 16
    assert run.prompt_template.key == metadata_prompt.METADATA_TEMPLATE_KEY
    # when
    assert run_all(running(run)) is None
    # then every item holds one model proposal, as the server computes it
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.done == 16 and run.failed == 0
    assert run.prompt_tokens > 0 and run.completion_tokens > 0
    proposals = MetadataProposal.objects.filter(origin=f"run:{run.pk}")
    assert proposals.count() == 16
    agree = 0
    for proposal in proposals.select_related("item"):
        assert proposal.source == ProposalSource.MODEL and proposal.label == "Meta"
        assert proposal.status == ProposalStatus.OK
        assert json.loads(proposal.raw_output)["skills"] == proposal.skills
        own = truth[proposal.item.instruction]
        agree += proposal.skills == own["skills"] and proposal.difficulty == own["difficulty"]
    assert 8 <= agree < 16  # the wrong share is a hash of the instruction, about a quarter


def test_garbage_answers_are_kept_raw_as_parse_failures(project, server):
    server.configure(faults={"garbage": 1.0})
    dataset = demo_dataset(project)
    run = running(metadata_run_create(judge=llm_judge(project, server), dataset=dataset))
    run_all(run)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.parse_failed == 16
    proposal = MetadataProposal.objects.filter(origin=f"run:{run.pk}").first()
    assert proposal.status == ProposalStatus.PARSE_FAILED
    assert proposal.raw_output.startswith("glorp") and "no JSON object" in proposal.error
    assert proposal.skills == [] and proposal.difficulty is None


def test_a_rerun_is_answered_from_the_cache_and_a_second_batch_records_nothing(project, server):
    dataset = demo_dataset(project)
    judge = llm_judge(project, server)
    first = running(metadata_run_create(judge=judge, dataset=dataset))
    run_all(first)
    calls = server.stats()["completions"]
    assert calls == 16
    # the same batch again (a redelivered message): nothing asked, nothing counted twice
    MetadataRun.objects.filter(pk=first.pk).update(status=RunStatus.RUNNING)
    run_all(first)
    first.refresh_from_db()
    assert first.done == 16 and server.stats()["completions"] == 16
    # a new run of the same judge: every answer from the cache, at no cost
    second = running(metadata_run_create(judge=judge, dataset=dataset))
    run_all(second)
    second.refresh_from_db()
    assert second.status == RunStatus.DONE and second.cached == 16 and second.done == 16
    assert second.cost == 0 and server.stats()["completions"] == 16
    assert LLMCacheEntry.objects.count() == 16


def test_the_budget_cap_pauses_the_run_and_a_higher_budget_finishes_it(project, server):
    dataset = demo_dataset(project)
    judge = llm_judge(
        project, server, price_per_1k_prompt=Decimal("1"), price_per_1k_completion=Decimal("1")
    )
    run = metadata_run_create(judge=judge, dataset=dataset, budget=Decimal("0.5"))
    assert Decimal(run.estimate["cost"]) > Decimal("0.5")
    run = running(run)
    run_all(run)
    run.refresh_from_db()
    # each call costs about 0.6-1.5 at these prices: the cap stops it after the first few
    assert run.status == RunStatus.PAUSED and "budget" in run.error
    assert 0 < run.done < 16 and run.cost >= Decimal("0.5")
    assert server.stats()["completions"] == run.done
    # when it is resumed without a limit, it asks about the items left only
    assert metadata_run_start(run=run, budget=None)
    run.refresh_from_db()
    run_all(run)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.done == 16
    assert server.stats()["completions"] == 16


def test_only_an_llm_judge_of_the_same_project_can_propose_metadata(project, server):
    dataset = demo_dataset(project)
    baseline = judge_config_create(
        project=project, name="F1", kind=JudgeKind.BASELINE, baseline="token-f1"
    )
    with pytest.raises(ValidationError, match="only an LLM judge"):
        metadata_run_create(judge=baseline, dataset=dataset)


def test_the_template_row_is_versioned_by_its_content(db):
    first = metadata_prompt_template()
    assert metadata_prompt_template() == first
    assert first.version == 1 and len(first.content_hash) == 64


@pytest.mark.slow
def test_a_metadata_run_on_the_demo_set_completes_through_a_real_worker(
    celery_worker_process, project
):
    # given the demo dataset and a server with latency and some injected 500s
    dataset = demo_dataset(project)
    with FakeOpenAIServer(
        style="json", latency=(0.0, 0.05), faults={"http_500": 0.2}, fault_seed=3
    ) as srv:
        srv.configure(metadata_truth=truth_of(dataset))
        judge = llm_judge(project, srv, max_attempts=6)
        run = metadata_run_create(judge=judge, dataset=dataset)
        # when
        assert metadata_run_start(run=run)
        # then every item gets exactly one proposal, the told metadata
        wait_for(lambda: MetadataRun.objects.get(pk=run.pk).status == RunStatus.DONE, timeout=60)
    run.refresh_from_db()
    assert run.done == 16 and run.failed == 0
    proposals = MetadataProposal.objects.filter(origin=f"run:{run.pk}")
    assert proposals.count() == 16
    for proposal in proposals.select_related("item"):
        assert proposal.skills == item_metadata(item=proposal.item)["skills"]
    assert Item.objects.filter(dataset=dataset).count() == 16


def test_a_stalled_run_is_dispatched_again_once_and_finishes_with_the_missing_items(
    project, server, django_capture_on_commit_callbacks
):
    # given a running run whose worker died after half its items
    dataset = demo_dataset(project)
    run = running(metadata_run_create(judge=llm_judge(project, server), dataset=dataset))
    ids = sorted(dataset.items.values_list("pk", flat=True))
    metadata_batch_range(run_id=run.pk, after_id=0, last_id=ids[7])
    MetadataRun.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    # when two sweeps run
    with django_capture_on_commit_callbacks() as callbacks:
        assert metadata_runs_redispatch_stalled(older_than_seconds=600) == [run.pk]
        assert metadata_runs_redispatch_stalled(older_than_seconds=600) == []
    # then one dispatch is enqueued, and its batches ask only about the missing items
    assert len(callbacks) == 1
    run.refresh_from_db()
    assert run.redispatches == 1 and run.done == 8
    metadata_batch_range(run_id=run.pk, after_id=0, last_id=ids[-1])
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.done == 16
    assert server.stats()["completions"] == 16


def _paused_by_budget(project, server):
    dataset = demo_dataset(project)
    judge = llm_judge(
        project, server, price_per_1k_prompt=Decimal("1"), price_per_1k_completion=Decimal("1")
    )
    run = running(metadata_run_create(judge=judge, dataset=dataset, budget=Decimal("0.5")))
    run_all(run)
    run.refresh_from_db()
    assert run.status == RunStatus.PAUSED and "budget" in run.error
    return run


def test_the_run_page_resumes_a_budget_paused_run_with_a_new_budget(
    project, server, researcher_client, django_capture_on_commit_callbacks
):
    run = _paused_by_budget(project, server)
    url = reverse("judging:metadata-run-action", args=[run.pk])
    page = researcher_client.get(reverse("judging:metadata-run-detail", args=[run.pk]))
    assert b"data-budget-reached" in page.content and b'value="pause"' not in page.content
    # an action its status does not allow is said, not silently ignored
    with django_capture_on_commit_callbacks(execute=False):
        answer = researcher_client.post(url, {"action": "pause"}, follow=True)
    assert "A paused run cannot be paused." in answer.content.decode()
    # a negative budget is refused with the field's error, and changes nothing
    answer = researcher_client.post(url, {"action": "resume", "budget": "-1"}, follow=True)
    assert "Nothing done: budget:" in answer.content.decode()
    run.refresh_from_db()
    assert run.status == RunStatus.PAUSED and run.budget == Decimal("0.5")
    # a blank budget (no limit) resumes it; the fan-out waits for the commit
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        answer = researcher_client.post(url, {"action": "resume", "budget": ""}, follow=True)
    assert "Run resumed." in answer.content.decode() and len(callbacks) == 1
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.budget is None and run.error == ""


def test_the_api_pauses_resumes_and_cancels_a_run_and_answers_409_when_it_cannot(
    project, server, researcher, django_capture_on_commit_callbacks
):
    client = APIClient()
    client.force_authenticate(researcher)
    run = _paused_by_budget(project, server)
    base = f"/api/v1/judging/metadata-runs/{run.pk}"
    assert client.post(f"{base}/pause/").status_code == 409
    refused = client.post(f"{base}/resume/", {"budget": "abc"}, format="json")
    assert refused.status_code == 400 and "budget" in str(refused.json())
    with django_capture_on_commit_callbacks(execute=False):
        answer = client.post(f"{base}/resume/", {"budget": "1000"}, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["status"] == "running" and answer.json()["budget"] == "1000.000000"
    assert client.post(f"{base}/pause/").json()["status"] == "paused"
    assert client.post(f"{base}/cancel/").json()["status"] == "cancelled"
    conflict = client.post(f"{base}/resume/", {}, format="json")
    assert conflict.status_code == 409 and "cancelled" in conflict.json()["detail"]


def test_resuming_on_a_provider_awaiting_approval_says_why(
    project, server, researcher_client, settings
):
    run = _paused_by_budget(project, server)
    provider = run.judge.provider
    provider.approved = False
    provider.save()
    answer = researcher_client.post(
        reverse("judging:metadata-run-action", args=[run.pk]),
        {"action": "resume", "budget": ""},
        follow=True,
    )
    assert "Not resumed:" in answer.content.decode()
    run.refresh_from_db()
    assert run.status == RunStatus.PAUSED
