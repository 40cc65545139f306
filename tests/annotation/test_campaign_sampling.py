"""A "sampled" campaign: only the responses drawn for people get tasks; the draws are recorded
once per batch and response (annotation.campaigns.services.campaign_sample_record), and the
project's sampling design reads them (annotation.selectors.sampling_design)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from annotation.campaigns.services import (
    CampaignStateError,
    SampleRefused,
    campaign_activate,
    campaign_create,
    campaign_sample_record,
    campaign_set_status,
    campaign_update,
)
from annotation.models import (
    CampaignItemPin,
    CampaignSample,
    CampaignSelection,
    CampaignStatus,
    Response,
    Task,
)
from annotation.selectors import sampling_design
from tests.annotation.test_assignments import make_dataset
from tests.judging.test_views import make_dataset as make_named_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path, items=3, models=("m1", "m2"))


def _sampled(project, dataset, name="S", **extra):
    return campaign_create(
        project=project, dataset=dataset, name=name, selection="sampled", overlap=2, **extra
    )


def _ids(dataset, model=None):
    responses = Response.objects.filter(item__dataset=dataset).order_by("pk")
    if model:
        responses = responses.filter(model_name=model)
    return list(responses.values_list("pk", flat=True))


def _task_responses(campaign):
    return sorted(Task.objects.filter(campaign=campaign).values_list("response_id", flat=True))


def test_a_draft_gets_tasks_for_its_drawn_responses_only_when_activated(project, dataset):
    # given a sampled draft that drew 2 of its first 4 responses
    campaign = _sampled(project, dataset)
    r = _ids(dataset)
    draws = [(r[0], 0.5, True), (r[1], 0.25, False), (r[2], 1.0, True), (r[3], 0.5, False)]
    # when
    drawn = campaign_sample_record(campaign=campaign, batch=1, draws=draws)
    # then nothing is assigned before activation, and activation makes the drawn ones' tasks
    assert drawn == 2
    assert _task_responses(campaign) == []
    assert campaign_activate(campaign=campaign) == 2
    assert _task_responses(campaign) == [r[0], r[2]]
    assert set(Task.objects.filter(campaign=campaign).values_list("overlap", flat=True)) == {2}


def test_an_active_campaign_gets_the_tasks_of_a_batch_at_once_with_their_items_pinned(
    project, dataset
):
    # given an active sampled campaign: activation alone makes no task
    campaign = _sampled(project, dataset)
    assert campaign_activate(campaign=campaign) == 0
    r = _ids(dataset)
    # when
    campaign_sample_record(
        campaign=campaign, batch=1, draws=[(r[4], 0.4, True), (r[5], 0.4, False)]
    )
    # then
    assert _task_responses(campaign) == [r[4]]
    item = Response.objects.get(pk=r[4]).item_id
    assert list(
        CampaignItemPin.objects.filter(campaign=campaign).values_list("item_id", flat=True)
    ) == [item]
    # a paused campaign gets them too (it is running, only not serving)
    campaign_set_status(campaign=campaign, status=CampaignStatus.PAUSED)
    campaign_sample_record(campaign=campaign, batch=2, draws=[(r[0], 0.9, True)])
    assert _task_responses(campaign) == [r[0], r[4]]


def test_a_batch_sent_again_is_recorded_once_and_other_draws_for_it_are_refused(project, dataset):
    campaign = _sampled(project, dataset)
    r = _ids(dataset)
    draws = [(r[0], 0.5, True), (r[1], 0.5, False)]
    assert campaign_sample_record(campaign=campaign, batch=1, draws=draws) == 1
    # the same batch again: the same answer, nothing new
    assert campaign_sample_record(campaign=campaign, batch=1, draws=list(reversed(draws))) == 1
    assert CampaignSample.objects.filter(campaign=campaign).count() == 2
    # the same number with other draws
    with pytest.raises(SampleRefused, match="already recorded with other draws"):
        campaign_sample_record(campaign=campaign, batch=1, draws=[(r[0], 0.5, False), draws[1]])
    assert CampaignSample.objects.filter(campaign=campaign, drawn=True).count() == 1


@pytest.mark.parametrize(
    ("batch", "draws", "message"),
    [
        (3, lambda r: [(r[2], 0.5, True)], "the next batch of this campaign is 2, not 3"),
        (2, lambda r: [(r[0], 0.5, True)], "decided in an earlier batch"),
        (2, lambda r: [(r[2], 0.0, True)], r"in \(0, 1\]"),
        (2, lambda r: [(r[2], 1.5, True)], r"in \(0, 1\]"),
        (2, lambda r: [(r[2], float("nan"), True)], r"in \(0, 1\]"),
        (2, lambda r: [(r[2], 0.5, True), (r[2], 0.5, False)], "twice in the batch"),
        (2, lambda r: [], "at least one response"),
        (0, lambda r: [(r[2], 0.5, True)], "numbered from 1"),
        (2, lambda r: [(r[1], 0.5, True)], "not among the campaign's"),  # an m2 response
    ],
)
def test_a_bad_batch_is_refused_whole(project, dataset, batch, draws, message):
    # given a campaign of m1's responses that recorded batch 1
    campaign = _sampled(project, dataset, model_names=["m1"])
    r = _ids(dataset)
    campaign_sample_record(campaign=campaign, batch=1, draws=[(r[0], 0.5, True)])
    # when / then
    with pytest.raises(SampleRefused, match=message):
        campaign_sample_record(campaign=campaign, batch=batch, draws=draws(r))
    assert CampaignSample.objects.filter(campaign=campaign).count() == 1


def test_a_response_of_another_dataset_is_refused(project, dataset, tmp_path):
    other = make_named_dataset(project, tmp_path, name="E", items=1)
    campaign = _sampled(project, dataset)
    foreign = _ids(other)[0]
    with pytest.raises(SampleRefused, match="not among the campaign's"):
        campaign_sample_record(campaign=campaign, batch=1, draws=[(foreign, 0.5, True)])


def test_a_campaign_of_every_response_and_a_finished_one_record_no_draws(project, dataset):
    r = _ids(dataset)
    every = campaign_create(project=project, dataset=dataset, name="All")
    with pytest.raises(SampleRefused, match="selection all"):
        campaign_sample_record(campaign=every, batch=1, draws=[(r[0], 0.5, True)])
    campaign = _sampled(project, dataset)
    campaign_activate(campaign=campaign)
    campaign_set_status(campaign=campaign, status=CampaignStatus.FINISHED)
    with pytest.raises(CampaignStateError, match="finished"):
        campaign_sample_record(campaign=campaign, batch=1, draws=[(r[0], 0.5, True)])


def test_a_pairwise_campaign_cannot_be_sampled(project, dataset):
    with pytest.raises(ValidationError, match="only a pointwise campaign"):
        campaign_create(
            project=project, dataset=dataset, name="P", mode="pairwise", selection="sampled"
        )
    pairwise = campaign_create(project=project, dataset=dataset, name="P", mode="pairwise")
    with pytest.raises(ValidationError, match="only a pointwise campaign"):
        campaign_update(campaign=pairwise, selection="sampled")


def test_the_selection_of_a_running_campaign_never_changes(project, dataset):
    # given a draft: its selection may change
    campaign = _sampled(project, dataset)
    campaign_update(campaign=campaign, selection="all")
    campaign_update(campaign=campaign, selection="sampled")
    campaign_activate(campaign=campaign)
    # when / then
    with pytest.raises(CampaignStateError, match="only a draft campaign can change selection"):
        campaign_update(campaign=campaign, selection="all")
    campaign.refresh_from_db()
    assert campaign.selection == CampaignSelection.SAMPLED


def test_a_draft_with_draws_keeps_its_dataset_and_models(project, dataset):
    campaign = _sampled(project, dataset)
    campaign_sample_record(campaign=campaign, batch=1, draws=[(_ids(dataset)[0], 0.5, True)])
    with pytest.raises(CampaignStateError, match="model_names cannot change"):
        campaign_update(campaign=campaign, model_names=["m2"])
    campaign_update(campaign=campaign, model_names=[], name="Renamed")  # unchanged: fine


def test_the_sampling_design_is_what_was_recorded_by_started_campaigns(project, dataset):
    # given an active sampled campaign, a later one deciding a response again, and a draft
    r = _ids(dataset)
    first = _sampled(project, dataset, name="first")
    campaign_activate(campaign=first)
    campaign_sample_record(campaign=first, batch=1, draws=[(r[0], 0.5, True), (r[1], 0.25, False)])
    later = _sampled(project, dataset, name="later")
    campaign_activate(campaign=later)
    campaign_sample_record(campaign=later, batch=1, draws=[(r[1], 0.75, True)])
    draft = _sampled(project, dataset, name="draft")
    campaign_sample_record(campaign=draft, batch=1, draws=[(r[2], 0.5, True)])
    # when
    design = sampling_design(project=project)
    # then the later campaign's decision wins, and the draft is not in it
    assert design == {r[0]: (0.5, True), r[1]: (0.75, True)}
