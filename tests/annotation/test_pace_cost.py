"""The researcher's cost estimate (median focused time per judgment x hourly wage) and the
pace and wage settings page and API."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from annotation.models import Assignment, AssignmentKind, Campaign, Task, TaskKind
from annotation.pace.selectors import campaign_cost_estimate, median
from annotation.pace.services import campaign_pace_update
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from tests.annotation.test_annotate_views import build_campaign, build_dataset
from tests.clients import token_client

HX = {"HX-Request": "true"}


def submit(campaign, user, active_ms):
    assignment = assignment_claim_next(campaign=campaign, annotator=user)
    assert assignment is not None
    scores = [ScoreInput(skill_id=s.skill_id, score=3) for s in task_skills(assignment=assignment)]
    human_score_submit(
        assignment_id=assignment.pk, annotator=user, scores=scores, active_ms=active_ms
    )
    return assignment


@pytest.fixture
def campaign(project, tmp_path, annotator):
    dataset = build_dataset(project, tmp_path, texts=[f"Answer {i}" for i in range(6)])
    return build_campaign(project, dataset, annotators=[annotator])


def test_median_of_odd_and_even_counts():
    assert median([]) is None
    assert median([5]) == 5
    assert median([1, 2, 100]) == 2
    assert median([10, 20, 30, 1000]) == 25  # (20 + 30) / 2
    assert median([1, 2]) == 2  # 1.5 rounds half up


def test_the_estimate_is_the_median_time_times_the_wage(campaign, annotator):
    # given four timed judgments: 60 s, 90 s, 120 s and a 2 h one left open over lunch,
    # and one without a measured time
    for ms in (60_000, 120_000, 7_200_000, 90_000, None):
        submit(campaign, annotator, ms)
    campaign_pace_update(
        campaign=campaign,
        hourly_wage=Decimal("12.00"),
        wage_currency="eur",
        break_every=None,
        break_minutes=5,
    )
    # when
    cost = campaign_cost_estimate(campaign=campaign)
    # then by hand: median of 60, 90, 120, 7200 s = (90 + 120) / 2 = 105 s;
    # 105 s at 12 EUR/h = 0.35 EUR a judgment; 350.00 per 1,000; 3 skills a judgment:
    # 116.67 per 1,000 skill scores (the mean, 1,857.75 s, would say 6,192.50)
    assert cost.judgments == 4 and cost.median_ms == 105_000
    assert cost.per_1000_judgments == Decimal("350.00")
    assert cost.skill_scores_per_judgment == Decimal("3.00")
    assert cost.per_1000_skill_scores == Decimal("116.67")
    assert cost.currency == "EUR"


def test_repeats_and_gold_tasks_do_not_count_in_the_estimate(campaign, annotator):
    first = submit(campaign, annotator, 60_000)
    second = submit(campaign, annotator, 90_000)
    # a hidden repeat's time is left out (made one after the fact)
    Assignment.objects.filter(pk=first.pk).update(kind=AssignmentKind.REPEAT)
    assert campaign_cost_estimate(campaign=campaign).median_ms == 90_000
    # and so is a gold task's
    Task.objects.filter(pk=second.task_id).update(kind=TaskKind.GOLD)
    assert campaign_cost_estimate(campaign=campaign).judgments == 0


def test_no_wage_or_no_time_gives_no_money_figure(campaign, annotator):
    assert campaign_cost_estimate(campaign=campaign).per_1000_judgments is None
    submit(campaign, annotator, 60_000)
    cost = campaign_cost_estimate(campaign=campaign)
    assert cost.median_ms == 60_000 and cost.per_1000_judgments is None


# --- the page -------------------------------------------------------------------------------


def test_the_page_saves_the_settings_and_shows_the_estimate(campaign, annotator, researcher_client):
    submit(campaign, annotator, 36_000)
    url = reverse("annotation:campaign-pace", args=[campaign.pk])
    post = {"hourly_wage": "10", "wage_currency": "gbp", "break_every": "20", "break_minutes": "5"}
    # when (htmx)
    response = researcher_client.post(url, post, headers=HX)
    # then the section comes back with the figures: 36 s at 10 GBP/h = 0.10 a judgment
    assert response.status_code == 200 and b"<html" not in response.content
    assert b"100.00 GBP" in response.content and b"33.33 GBP" in response.content
    campaign.refresh_from_db()
    assert (campaign.hourly_wage, campaign.wage_currency, campaign.break_every) == (
        Decimal("10.00"),
        "GBP",
        20,
    )
    # and without htmx the page redirects to the campaign page
    response = researcher_client.post(url, post)
    assert response.status_code == 302 and response["Location"].endswith("#campaign-pace")
    # and the campaign page loads the section from here
    page = researcher_client.get(reverse("annotation:campaign-detail", args=[campaign.pk]))
    assert f'hx-get="{url}"'.encode() in page.content


@pytest.mark.parametrize(
    "post",
    [
        {"hourly_wage": "-1", "wage_currency": "USD", "break_minutes": "5"},
        {"hourly_wage": "1e9", "wage_currency": "USD", "break_minutes": "5"},
        {"hourly_wage": "10", "wage_currency": "U$D", "break_minutes": "5"},
        {"hourly_wage": "10", "wage_currency": "USD", "break_every": "0", "break_minutes": "5"},
        {"hourly_wage": "10", "wage_currency": "USD", "break_minutes": "0"},
    ],
)
def test_bad_settings_come_back_as_200_and_change_nothing(campaign, researcher_client, post):
    url = reverse("annotation:campaign-pace", args=[campaign.pk])
    response = researcher_client.post(url, post, headers=HX)
    assert response.status_code == 200 and b'class="error"' in response.content
    campaign.refresh_from_db()
    assert (campaign.hourly_wage, campaign.wage_currency, campaign.break_every) == (
        None,
        "USD",
        None,
    )


def test_the_page_is_for_staff_only(campaign, annotator_client, outsider_client, researcher_client):
    url = reverse("annotation:campaign-pace", args=[campaign.pk])
    assert annotator_client.get(url).status_code == 403
    assert outsider_client.get(url).status_code == 404
    assert researcher_client.put(url).status_code == 405
    full = researcher_client.get(url)
    assert full.status_code == 200 and b"<html" in full.content
    assert b"<html" not in researcher_client.get(url, headers=HX).content


def test_the_cost_api(campaign, annotator, researcher):
    submit(campaign, annotator, 60_000)
    campaign_pace_update(
        campaign=campaign,
        hourly_wage=Decimal("15"),
        wage_currency="USD",
        break_every=None,
        break_minutes=5,
    )
    response = token_client(researcher).get(f"/api/v1/annotation/campaigns/{campaign.pk}/cost/")
    assert response.status_code == 200
    assert response.json() == {
        "judgments_timed": 1,
        "median_active_ms": 60000,
        "skill_scores_per_judgment": "3.00",
        "hourly_wage": "15.00",
        "currency": "USD",
        "cost_per_1000_judgments": "250.00",
        "cost_per_1000_skill_scores": "83.33",
    }
    assert (
        token_client(annotator).get(f"/api/v1/annotation/campaigns/{campaign.pk}/cost/").status_code
        == 403
    )
    assert Campaign.objects.filter(pk=campaign.pk).exists()
