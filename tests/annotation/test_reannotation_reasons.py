"""Why a send-back brought no new annotation (or fewer than asked), and what would work:
one reason per kind of answer, each with the next steps that do work, tested by taking
the step and seeing it reopen the task."""

# ruff: noqa: F811  (the fixtures imported from test_reannotation)
from __future__ import annotations

import json

import pytest

from annotation.campaigns.services import campaign_activate, campaign_create, campaign_set_status
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import (
    CampaignStatus,
    ReannotationRequest,
    Task,
    TaskKind,
    UploadSource,
)
from annotation.services.reannotation import (
    MAX_OVERLAP,
    Outcome,
    Step,
    Why,
    responses_reannotate,
)
from tests.annotation.test_assignments import SKILLS, make_dataset
from tests.annotation.test_reannotation import (  # noqa: F401  (fixtures)
    annotate_all,
    done_campaign,
    people,
    rid,
    state,
)


def send(campaign, ids, extra, who):
    return responses_reannotate(campaign=campaign, response_ids=ids, extra=extra, requested_by=who)


def only_reason(result):
    assert len(result.reasons) == 1, result.reasons
    return result.reasons[0]


def test_a_response_whose_annotations_are_still_on_their_way_says_how_many_to_ask_for(
    project, tmp_path, people
):
    # given: a fresh campaign (K=3, nothing submitted), as in the demo, where the human
    # scores the explorer shows were imported
    dataset = make_dataset(project, tmp_path)
    fresh = campaign_create(
        project=project, dataset=dataset, name="F", overlap=3, annotators=people
    )
    campaign_activate(campaign=fresh)
    target = rid("m1", "i0")
    # when
    result = send(fresh, [target], 1, people[0])
    # then: nothing reopened, and the reason says why and what would work
    assert result.request.reopened == 0
    reason = only_reason(result)
    assert reason.code == Why.ALREADY_OPEN and reason.responses == (target,)
    assert "3 on the way, 0 of 3 submitted" in reason.text
    assert "imported" in reason.text
    more, wait = reason.next_steps
    assert (more.action, more.extra, more.campaign, more.responses) == (
        Step.SEND_BACK_WITH_MORE,
        4,
        fresh.pk,
        (target,),
    )
    assert wait.action == Step.WAIT and wait.campaign == fresh.pk
    # and taking the step works
    again = send(fresh, list(more.responses), more.extra, people[0])
    assert [o.outcome for o in again.outcomes] == [Outcome.REOPENED]
    assert again.reasons == []


def test_a_pool_no_larger_than_the_open_slots_needs_more_people_before_more_extra(
    project, tmp_path, people
):
    # given: K=3 and a pool of three, as in the demo: the open slots wait for all of them
    dataset = make_dataset(project, tmp_path)
    demo = campaign_create(
        project=project, dataset=dataset, name="F", overlap=3, annotators=people[:3]
    )
    campaign_activate(campaign=demo)
    target = rid("m1", "i0")
    reason = only_reason(send(demo, [target], 1, people[0]))
    add, wait = reason.next_steps
    assert (add.action, add.extra, add.campaign) == (Step.ADD_ANNOTATORS, 4, demo.pk)
    assert wait.action == Step.WAIT
    # a larger extra alone would indeed reopen nothing
    assert send(demo, [target], 4, people[0]).outcomes[0].outcome == Outcome.NO_ANNOTATOR_LEFT
    demo.annotators.add(people[3])
    assert send(demo, [target], add.extra, people[0]).outcomes[0].outcome == Outcome.REOPENED


def test_more_on_the_way_than_a_send_back_can_ask_for_offers_only_waiting(done_campaign, people):
    target = rid("m1", "i0")
    Task.objects.filter(campaign=done_campaign, response_id=target).update(overlap=9)
    reason = only_reason(send(done_campaign, [target], 1, people[0]))
    assert reason.code == Why.ALREADY_OPEN
    assert [s.action for s in reason.next_steps] == [Step.WAIT]


def test_no_annotator_left_offers_adding_annotators_to_the_pool(done_campaign, people):
    target = rid("m1", "i0")
    send(done_campaign, [target], 1, people[0])
    annotate_all(done_campaign, people[2])  # cat was the last one who had not had it
    result = send(done_campaign, [target], 1, people[0])
    reason = only_reason(result)
    assert reason.code == Why.NO_ANNOTATOR_LEFT and "pool" in reason.text
    (step,) = reason.next_steps
    assert step.action == Step.ADD_ANNOTATORS and step.campaign == done_campaign.pk
    # adding dan to the pool and sending it back again works
    done_campaign.annotators.add(people[3])
    assert send(done_campaign, [target], 1, people[0]).outcomes[0].outcome == Outcome.REOPENED


def test_a_partial_reopen_says_why_it_is_partial(done_campaign, people):
    result = send(done_campaign, [rid("m1", "i0")], 3, people[0])
    assert result.request.reopened == 1
    reason = only_reason(result)
    assert reason.code == Why.REOPENED_PARTLY
    assert [s.action for s in reason.next_steps] == [Step.ADD_ANNOTATORS]


def test_a_response_at_the_cap_offers_a_new_campaign(done_campaign, people):
    target = rid("m1", "i0")
    Task.objects.filter(campaign=done_campaign, response_id=target).update(
        overlap=MAX_OVERLAP, assigned=MAX_OVERLAP, submitted=MAX_OVERLAP
    )
    reason = only_reason(send(done_campaign, [target], 1, people[0]))
    assert reason.code == Why.AT_CAP and str(MAX_OVERLAP) in reason.text
    (step,) = reason.next_steps
    assert step.action == Step.CREATE_CAMPAIGN and step.dataset == done_campaign.dataset_id


def test_a_gold_task_is_a_quality_check_not_a_missing_task(done_campaign, people):
    target = rid("m1", "i0")
    Task.objects.filter(campaign=done_campaign, response_id=target).update(kind=TaskKind.GOLD)
    result = send(done_campaign, [target], 1, people[0])
    assert result.outcomes[0].outcome == Outcome.NOT_IN_CAMPAIGN  # the stored outcome stays
    reason = only_reason(result)
    assert reason.code == Why.QUALITY_TASK and "gold or attention" in reason.text
    assert [s.action for s in reason.next_steps] == [Step.CREATE_CAMPAIGN]


def test_a_response_of_another_campaign_offers_sending_it_back_there(
    done_campaign, people, project
):
    # given: a second campaign over the m2 responses only; an m1 response is in C alone
    second = campaign_create(
        project=project,
        dataset=done_campaign.dataset,
        name="Second",
        overlap=1,
        annotators=people,
        model_names=["m2"],
    )
    campaign_activate(campaign=second)
    target = rid("m1", "i0")
    # when: sent back in the second campaign
    reason = only_reason(send(second, [target], 1, people[0]))
    # then
    assert reason.code == Why.NOT_IN_CAMPAIGN and "another campaign" in reason.text
    (step,) = reason.next_steps
    assert step.action == Step.SEND_BACK_IN_CAMPAIGN
    assert (step.campaign, step.extra, step.responses) == (done_campaign.pk, 1, (target,))
    assert send(done_campaign, [target], 1, people[0]).outcomes[0].outcome == Outcome.REOPENED


def test_a_response_in_no_campaign_offers_a_campaign_over_its_dataset(
    done_campaign, people, project, tmp_path
):
    # given: another dataset of the project, with no campaign
    path = tmp_path / "other.jsonl"
    path.write_text(
        json.dumps(
            {
                "id": "x0",
                "instruction": "Q",
                "skills": SKILLS,
                "domains": ["History"],
                "difficulty": 2,
                "responses": [{"model": "m9", "text": "t"}],
            }
        )
        + "\n"
    )
    upload = dataset_import(
        upload_id=dataset_upload_create(
            project=project,
            dataset_name="Other",
            source=UploadSource.CLI,
            files=[(FileSpec(path.name), str(path))],
        ).pk
    )
    assert upload.dataset is not None, upload.summary
    lone = upload.dataset.items.get().responses.get().pk
    # when
    result = send(done_campaign, [lone, 999_999], 1, people[0])
    # then: both are in no campaign; a campaign can be made over the dataset of the one
    reason = only_reason(result)
    assert reason.code == Why.NOT_IN_CAMPAIGN and reason.responses == (lone, 999_999)
    assert "no started campaign" in reason.text
    (step,) = reason.next_steps
    assert (step.action, step.dataset, step.responses) == (
        Step.CREATE_CAMPAIGN,
        upload.dataset.pk,
        (lone,),
    )


def test_a_finished_campaign_changes_nothing_and_offers_a_new_campaign(done_campaign, people):
    # given: campaign_set_status allows no finished -> active
    campaign_set_status(campaign=done_campaign, status=CampaignStatus.FINISHED)
    before = state(done_campaign)
    target = rid("m1", "i0")
    # when
    result = send(done_campaign, [target], 1, people[0])
    # then: no task raised, the campaign still finished, the ask on record with its reason
    assert [o.outcome for o in result.outcomes] == [Outcome.CAMPAIGN_FINISHED]
    assert result.outcomes[0].overlap_after == result.outcomes[0].overlap_before == 2
    after = state(done_campaign)
    assert after["tasks"] == before["tasks"] and after["campaign"] == before["campaign"]
    assert ReannotationRequest.objects.get().reopened == 0
    reason = only_reason(result)
    assert reason.code == Why.CAMPAIGN_FINISHED and "finished" in reason.text
    (step,) = reason.next_steps
    assert step.action == Step.CREATE_CAMPAIGN and step.dataset == done_campaign.dataset_id


def test_a_paused_campaign_says_the_tasks_wait_for_a_resume(done_campaign, people):
    campaign_set_status(campaign=done_campaign, status=CampaignStatus.PAUSED)
    result = send(done_campaign, [rid("m1", "i0")], 1, people[0])
    assert result.request.reopened == 1
    reason = only_reason(result)
    assert reason.code == Why.CAMPAIGN_PAUSED
    assert [s.action for s in reason.next_steps] == [Step.RESUME_CAMPAIGN]


@pytest.mark.parametrize("extra", [1, 2])
def test_a_request_that_reopens_everything_has_no_reason(done_campaign, people, extra):
    done_campaign.annotators.add(people[3])
    assert send(done_campaign, [rid("m1", "i0")], extra, people[0]).reasons == []
