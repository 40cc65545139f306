"""Sending responses back for re-annotation: the target-based overlap raise, the audit row,
what is reported instead of changed, refusals that change nothing, and that the claim
really serves a reopened task to someone new (and only to someone new)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from annotation.campaigns.services import campaign_activate, campaign_create, campaign_set_status
from annotation.models import (
    AnnotatorExpertise,
    Campaign,
    CampaignStatus,
    Domain,
    HumanScore,
    ReannotationRequest,
    Response,
    Task,
    TaskKind,
)
from annotation.services.assignments import assignment_claim_next, human_score_submit
from annotation.services.reannotation import MAX_OVERLAP, Outcome, responses_reannotate
from tests.annotation.test_assignments import full_scores, make_dataset


def annotate_all(campaign, *people) -> None:
    """Each person claims and submits until the campaign has nothing left for them."""
    for person in people:
        while (a := assignment_claim_next(campaign=campaign, annotator=person)) is not None:
            human_score_submit(assignment_id=a.pk, annotator=person, scores=full_scores(a, 3))


@pytest.fixture
def people(django_user_model):
    return [
        django_user_model.objects.create_user(name, password="x")
        for name in ("ann", "ben", "cat", "dan")
    ]


@pytest.fixture
def done_campaign(project, tmp_path, people):
    """Overlap 2, pool of four; ann and ben scored all six responses."""
    dataset = make_dataset(project, tmp_path)
    campaign = campaign_create(
        project=project, dataset=dataset, name="C", overlap=2, annotators=people[:3]
    )
    campaign_activate(campaign=campaign)
    annotate_all(campaign, people[0], people[1])
    assert set(Task.objects.filter(campaign=campaign).values_list("submitted", flat=True)) == {2}
    return campaign


def rid(model: str, item: str) -> int:
    return Response.objects.get(item__external_id=item, model_name=model).pk


def state(campaign) -> dict:
    """Everything a request may change, to prove that a refused one changed nothing."""
    return {
        "tasks": sorted(
            Task.objects.filter(campaign=campaign).values_list(
                "pk", "overlap", "assigned", "submitted"
            )
        ),
        "campaign": Campaign.objects.filter(pk=campaign.pk).values_list("status", "overlap").get(),
        "requests": ReannotationRequest.objects.count(),
        "scores": HumanScore.objects.count(),
    }


def test_it_raises_the_overlap_to_the_target_and_keeps_the_scores(done_campaign, people):
    # given
    scores_before = HumanScore.objects.count()
    target = rid("m1", "i0")
    # when
    result = responses_reannotate(
        campaign=done_campaign, response_ids=[target], extra=1, requested_by=people[0]
    )
    # then
    task = Task.objects.get(campaign=done_campaign, response_id=target)
    assert (task.overlap, task.assigned, task.submitted) == (3, 2, 2)
    assert [o.outcome for o in result.outcomes] == [Outcome.REOPENED]
    assert result.outcomes[0].eligible == 1  # cat; dan is not in the pool
    assert HumanScore.objects.count() == scores_before
    # the claim's bound is the campaign's K: raised with it, or the task is never served
    done_campaign.refresh_from_db()
    assert done_campaign.overlap == 3
    assert Task.objects.exclude(pk=task.pk).filter(overlap=2).count() == 5


def test_it_records_who_asked_what_and_what_happened(done_campaign, people):
    ids = [rid("m2", "i1"), rid("m1", "i0"), 999_999]
    result = responses_reannotate(
        campaign=done_campaign, response_ids=ids + [ids[0]], extra=1, requested_by=people[3]
    )
    row = ReannotationRequest.objects.get()
    assert row == result.request
    assert row.requested_by == people[3] and row.extra == 1 and row.reopened == 2
    assert row.response_ids == sorted(set(ids))
    assert row.campaign_status_before == row.campaign_status_after == CampaignStatus.ACTIVE
    assert (row.campaign_overlap_before, row.campaign_overlap_after) == (2, 3)
    outcomes = {o["response"]: o for o in row.outcomes}
    assert outcomes[999_999]["outcome"] == Outcome.NOT_IN_CAMPAIGN
    assert outcomes[ids[0]] | {"task": None} == {
        "response": ids[0],
        "outcome": Outcome.REOPENED,
        "task": None,
        "overlap_before": 2,
        "overlap_after": 3,
        "submitted": 2,
        "eligible": 1,
    }


def test_the_same_request_twice_raises_the_overlap_once(done_campaign, people):
    target = rid("m1", "i0")
    done_campaign.annotators.add(people[3])
    responses_reannotate(
        campaign=done_campaign, response_ids=[target], extra=2, requested_by=people[0]
    )
    again = responses_reannotate(
        campaign=done_campaign, response_ids=[target], extra=2, requested_by=people[0]
    )
    assert [o.outcome for o in again.outcomes] == [Outcome.ALREADY_OPEN]
    assert Task.objects.get(campaign=done_campaign, response_id=target).overlap == 4
    assert ReannotationRequest.objects.count() == 2  # both asks are on record
    assert again.request.reopened == 0


def test_a_later_request_after_new_scores_asks_for_more(done_campaign, people):
    target = rid("m1", "i0")
    done_campaign.annotators.add(people[3])
    responses_reannotate(
        campaign=done_campaign, response_ids=[target], extra=1, requested_by=people[0]
    )
    annotate_all(done_campaign, people[2])  # cat gives the third annotation
    result = responses_reannotate(
        campaign=done_campaign, response_ids=[target], extra=1, requested_by=people[0]
    )
    assert [o.outcome for o in result.outcomes] == [Outcome.REOPENED]
    assert Task.objects.get(campaign=done_campaign, response_id=target).overlap == 4


def test_slots_nobody_can_fill_are_not_created(done_campaign, people):
    target = rid("m1", "i0")
    # only cat is left: asking for 3 more reopens one slot and says so
    partly = responses_reannotate(
        campaign=done_campaign, response_ids=[target], extra=3, requested_by=people[0]
    )
    assert partly.outcomes[0].outcome == Outcome.REOPENED_PARTLY
    assert partly.outcomes[0].overlap_after == 3
    annotate_all(done_campaign, people[2])
    # now everyone in the pool has scored it
    none_left = responses_reannotate(
        campaign=done_campaign, response_ids=[target], extra=1, requested_by=people[0]
    )
    assert none_left.outcomes[0].outcome == Outcome.NO_ANNOTATOR_LEFT
    assert none_left.outcomes[0].eligible == 0
    assert Task.objects.get(campaign=done_campaign, response_id=target).overlap == 3


def test_annotators_outside_the_routed_domain_do_not_count(done_campaign, people):
    Campaign.objects.filter(pk=done_campaign.pk).update(route_by_domain=True)
    done_campaign.refresh_from_db()
    AnnotatorExpertise.objects.create(user=people[2], domain=Domain.objects.get(name="Coding"))
    result = responses_reannotate(
        campaign=done_campaign, response_ids=[rid("m1", "i0")], extra=1, requested_by=people[0]
    )
    assert result.outcomes[0].outcome == Outcome.NO_ANNOTATOR_LEFT  # the items are History


def test_the_overlap_never_goes_above_the_cap(done_campaign, people):
    target = rid("m1", "i0")
    Task.objects.filter(campaign=done_campaign, response_id=target).update(
        overlap=MAX_OVERLAP, assigned=MAX_OVERLAP, submitted=MAX_OVERLAP
    )
    result = responses_reannotate(
        campaign=done_campaign, response_ids=[target], extra=1, requested_by=people[0]
    )
    assert result.outcomes[0].outcome == Outcome.AT_CAP
    assert Task.objects.get(campaign=done_campaign, response_id=target).overlap == MAX_OVERLAP


def test_gold_tasks_are_not_reopened(done_campaign, people):
    target = rid("m1", "i0")
    Task.objects.filter(campaign=done_campaign, response_id=target).update(kind=TaskKind.GOLD)
    result = responses_reannotate(
        campaign=done_campaign, response_ids=[target], extra=1, requested_by=people[0]
    )
    assert result.outcomes[0].outcome == Outcome.NOT_IN_CAMPAIGN


@pytest.mark.parametrize(
    ("response_ids", "extra", "field"),
    [
        ([1], 0, "extra"),
        ([1], 6, "extra"),
        ([], 1, "response_ids"),
        (["x"], 1, "response_ids"),
        ([True], 1, "response_ids"),
        ([1], True, "extra"),
    ],
)
def test_a_bad_request_is_refused_and_changes_nothing(
    done_campaign, people, response_ids, extra, field
):
    before = state(done_campaign)
    with pytest.raises(ValidationError) as info:
        responses_reannotate(
            campaign=done_campaign,
            response_ids=response_ids,
            extra=extra,
            requested_by=people[0],
        )
    assert field in info.value.message_dict
    assert state(done_campaign) == before


def test_a_draft_campaign_is_refused(project, tmp_path, people):
    dataset = make_dataset(project, tmp_path)
    draft = campaign_create(project=project, dataset=dataset, name="Draft", annotators=people)
    with pytest.raises(ValidationError, match="draft"):
        responses_reannotate(campaign=draft, response_ids=[1], extra=1, requested_by=people[0])
    assert ReannotationRequest.objects.count() == 0


def test_a_finished_campaign_raises_nothing_while_the_state_machine_cannot_reopen_it(
    done_campaign, people
):
    # campaign_set_status allows no finished -> active: nothing is raised, the ask is on
    # record, and the result says why (tests/annotation/test_reannotation_reasons.py)
    campaign_set_status(campaign=done_campaign, status=CampaignStatus.FINISHED)
    before = state(done_campaign)
    result = responses_reannotate(
        campaign=done_campaign,
        response_ids=[rid("m1", "i0")],
        extra=1,
        requested_by=people[0],
    )
    assert [o.outcome for o in result.outcomes] == [Outcome.CAMPAIGN_FINISHED]
    assert state(done_campaign) == before | {"requests": before["requests"] + 1}


def test_a_paused_campaign_stays_paused(done_campaign, people):
    campaign_set_status(campaign=done_campaign, status=CampaignStatus.PAUSED)
    result = responses_reannotate(
        campaign=done_campaign, response_ids=[rid("m1", "i0")], extra=1, requested_by=people[0]
    )
    assert result.campaign_status == CampaignStatus.PAUSED
    assert assignment_claim_next(campaign=done_campaign, annotator=people[2]) is None
    campaign_set_status(campaign=done_campaign, status=CampaignStatus.ACTIVE)
    assert assignment_claim_next(campaign=done_campaign, annotator=people[2]) is not None


def test_the_claim_serves_a_reopened_task_to_a_new_annotator_only(done_campaign, people):
    # given: every task is complete, so nobody gets anything
    ann, ben, cat, _ = people
    assert assignment_claim_next(campaign=done_campaign, annotator=cat) is None
    target = rid("m2", "i1")
    # when
    responses_reannotate(campaign=done_campaign, response_ids=[target], extra=1, requested_by=ann)
    # then: those who scored it get nothing; cat gets exactly that task, once
    assert assignment_claim_next(campaign=done_campaign, annotator=ann) is None
    assert assignment_claim_next(campaign=done_campaign, annotator=ben) is None
    lease = assignment_claim_next(campaign=done_campaign, annotator=cat)
    assert lease is not None and lease.task.response_id == target
    human_score_submit(assignment_id=lease.pk, annotator=cat, scores=full_scores(lease, 5))
    assert assignment_claim_next(campaign=done_campaign, annotator=cat) is None
    task = Task.objects.get(pk=lease.task_id)
    assert (task.overlap, task.assigned, task.submitted) == (3, 3, 3)
    assert HumanScore.objects.filter(response_id=target).count() == 3 * 3  # 3 people x 3 skills
