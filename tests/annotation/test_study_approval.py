"""Approving study participants (docs/CROWD.md "Approving"): per participant the work
done, quality figures, flags and a suggested decision, in the page, a CSV whose first
column pastes into the platform's bulk approve, MTurk's batch upload and the API; the
campaign's quality rules, and screening out at finishing by them."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from annotation.models import Campaign, Participant, ParticipantState
from annotation.study import services
from tests.annotation.test_annotate_views import build_campaign, build_dataset
from tests.annotation.test_study_links import entry_url

STRICT = {"min_scores_for_flags": 5, "max_straightline_share": 0.9}


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.delete("study-entry:addr:127.0.0.1")
    yield
    cache.delete("study-entry:addr:127.0.0.1")


@pytest.fixture
def campaign(project, tmp_path) -> Campaign:
    dataset = build_dataset(project, tmp_path, texts=["One", "Two", "Three", "Four"])
    campaign = build_campaign(project, dataset, overlap=2)
    services.study_settings_update(
        campaign=campaign, consent_text="", completion_code="PAID", screenout_code="OUT"
    )
    return campaign


@pytest.fixture
def link(campaign):
    return services.study_link_create(campaign=campaign, platform="prolific")


def participant(link, pid: str, *, score=None) -> Participant:
    cache.delete("study-entry:addr:127.0.0.1")
    Client().get(entry_url(link, PROLIFIC_PID=pid, STUDY_ID="s", SESSION_ID=f"sess-{pid}"))
    p = Participant.objects.get(worker_id=pid)
    _score_all(p, score)
    return p


def _score_all(p: Participant, score) -> None:
    from annotation.services.assignments import (
        ScoreInput,
        assignment_claim_next,
        human_score_submit,
        task_skills,
    )

    i = 0
    while a := assignment_claim_next(campaign=p.campaign, annotator=p.user):
        skills = task_skills(assignment=a)
        values = [score if score else 1 + (i + j) % 5 for j in range(len(skills))]
        scores = [ScoreInput(s.skill_id, v) for s, v in zip(skills, values, strict=True)]
        human_score_submit(assignment_id=a.pk, annotator=p.user, scores=scores, active_ms=20_000)
        i += 1


def approval_url(campaign, **query) -> str:
    url = reverse("annotation:campaign-study-participants", args=[campaign.pk])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def test_a_straight_liner_is_flagged_for_review_and_the_others_approved(
    link, campaign, researcher_client
):
    # given rules that flag one score everywhere, a varied and a straight-lining worker
    services.quality_rules_update(campaign=campaign, rules=STRICT, screen_out=False)
    varied = participant(link, "varied")
    liner = participant(link, "liner", score=4)
    for p in (varied, liner):
        services.participant_finish(participant=p)
    # when the researcher opens the approval page
    page = researcher_client.get(approval_url(campaign)).content.decode()
    # then the varied worker is to approve (their id in the bulk-approve box), the other
    # to review with the reason
    box = page.split("data-approve-ids>")[1].split("</textarea>")[0]
    assert box.split() == ["varied"]
    liner_row = page.split('data-participant="liner"')[1].split("</tr>")[0]
    assert 'data-decision="review"' in page.split("<tr")[-1] or "Review" in liner_row
    assert 'data-flag="straightline"' in liner_row


def test_the_approval_csv_pastes_into_the_platform(link, campaign, researcher_client):
    services.quality_rules_update(campaign=campaign, rules=STRICT, screen_out=False)
    for pid, score in (("varied", None), ("liner", 4)):
        services.participant_finish(participant=participant(link, pid, score=score))
    response = researcher_client.get(approval_url(campaign, format="csv"))
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert list(rows[0])[0] == "worker_id"
    by_id = {r["worker_id"]: r for r in rows}
    assert by_id["varied"]["decision"] == "approve"
    assert by_id["liner"]["decision"] == "review" and "straightline" in by_id["liner"]["flags"]
    assert by_id["varied"]["tasks_done"] == "4" and float(by_id["varied"]["active_minutes"]) > 0
    # only those to approve
    only = researcher_client.get(approval_url(campaign, format="csv", decision="approve"))
    assert [r["worker_id"] for r in csv.DictReader(io.StringIO(only.content.decode()))] == [
        "varied"
    ]
    # MTurk's batch upload: assignment, worker, an x to approve
    mturk = researcher_client.get(approval_url(campaign, format="mturk")).content.decode()
    lines = mturk.splitlines()
    assert lines[0] == "AssignmentId,WorkerId,Approve,Reject"
    assert "sess-varied,varied,x," in lines and "sess-liner,liner,," in lines


def test_breaking_a_rule_screens_out_at_finishing_when_asked(link, campaign):
    services.quality_rules_update(campaign=campaign, rules=STRICT, screen_out=True)
    liner = participant(link, "liner", score=4)
    varied = participant(link, "varied")
    liner = services.participant_finish(participant=liner)
    varied = services.participant_finish(participant=varied)
    assert (liner.state, liner.end_reason) == (ParticipantState.SCREENED_OUT, "quality")
    assert services.participant_completion(participant=liner, link=link).code == "OUT"
    assert varied.state == ParticipantState.COMPLETED


def test_quality_rules_are_saved_and_checked_on_the_page(campaign, researcher_client):
    url = approval_url(campaign)
    bad = researcher_client.post(url, {"min_gold_accuracy": "7", "screen_out": "on"})
    assert bad.status_code == 400
    campaign.refresh_from_db()
    assert not campaign.quality_screen_out
    ok = researcher_client.post(url, {"min_gold_accuracy": "0.75", "screen_out": "on"})
    assert ok.status_code == 302
    campaign.refresh_from_db()
    assert campaign.quality_screen_out
    assert campaign.quality_rules["min_gold_accuracy"] == 0.75
    assert campaign.quality_rules["max_straightline_share"] is None  # left empty: off


def test_the_api_gives_each_participant_figures_flags_and_a_decision(link, campaign, researcher):
    from tests.clients import token_client

    services.quality_rules_update(campaign=campaign, rules=STRICT, screen_out=False)
    services.participant_finish(participant=participant(link, "liner", score=4))
    body = (
        token_client(researcher)
        .get(f"/api/v1/annotation/campaigns/{campaign.pk}/participants/")
        .json()
    )
    (row,) = body["results"]
    assert row["decision"] == "review" and row["end_reason"] in ("no_task", "quota")
    assert [f["code"] for f in row["flags"]] == ["straightline"]
    assert row["straightline_share"] == 1.0 and row["scores_n"] >= 5


def test_annotators_never_see_the_approval_page(campaign, annotator_client):
    assert annotator_client.get(approval_url(campaign)).status_code == 403


def test_the_approval_page_reads_a_bounded_number_of_queries(
    link, campaign, researcher_client, django_assert_max_num_queries
):
    for i in range(3):
        participant(link, f"w{i}")
    researcher_client.get(approval_url(campaign))
    with django_assert_max_num_queries(20):
        assert researcher_client.get(approval_url(campaign)).status_code == 200
