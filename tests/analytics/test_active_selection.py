"""Active selection (analytics/active/): the uncertainty figures and the batch design (pure,
against hand-worked numbers and a simulation of unbiasedness), the plan and its batches on
a campaign (the probabilities recorded, the tasks made, re-planning, idempotent draws, what
is refused), the page and the API with their access rules, and an estimate from the design."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from analytics.active import uncertainty as u
from analytics.active.services import (
    BatchStale,
    SelectionRefused,
    selection_batch_draw,
    selection_plan_create,
    selection_plan_update,
)
from analytics.models import SelectionBatch, SelectionPlan
from analytics.ppi import active_mean, inclusion_probabilities
from analytics.report.selectors import project_report
from annotation.campaigns.services import (
    CampaignStateError,
    campaign_activate,
    campaign_create,
    campaign_update,
)
from annotation.models import CampaignSample, ProjectRole, Response, Skill, Task
from annotation.selectors import sampling_design
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from annotation.services.projects import membership_set, project_create
from judging.models import JudgeKind, JudgeRun, JudgeScore, Judgment, JudgmentStatus, RunStatus
from judging.services import judge_config_create
from tests.annotation.test_assignments import SKILLS, make_dataset
from tests.clients import token_client

# --- the figures (pure) -----------------------------------------------------------------------


def test_the_sd_figure_averages_each_keys_sample_sd_over_the_keys_with_two_values():
    figures = u.sd_figures([{"a": [3, 5], "b": [4, 4]}, {"a": [3]}, {"a": [1, 2, 3]}])
    # sd([3, 5], ddof 1) = sqrt(2); sd([4, 4]) = 0; sd([1, 2, 3]) = 1
    assert figures[0] == pytest.approx(math.sqrt(2) / 2, abs=1e-12)
    assert figures[1] is None
    assert figures[2] == pytest.approx(1.0, abs=1e-12)


def test_spread_fills_a_response_without_figure_with_the_batch_mean():
    found = u.spread([{(1, "a"): [3, 5]}, {(1, "a"): [4, 4]}, {(1, "a"): [2]}])
    assert found.source == "spread" and found.note == ""
    # spreads sqrt(2), 0 and (filled) sqrt(2)/2: squares 2, 0, 1/2, mean m = 5/6; each
    # figure is sqrt(m + s^2), so the response whose samples agree keeps sqrt(5/6)
    assert found.values.tolist() == pytest.approx(
        [math.sqrt(5 / 6 + 2), math.sqrt(5 / 6), math.sqrt(5 / 6 + 1 / 2)]
    )


def test_spread_with_one_sample_per_response_is_uniform_and_says_so():
    found = u.spread([{(1, "a"): [3]}, {(1, "a"): [4]}])
    assert found.source == "uniform" and found.values.tolist() == [1.0, 1.0]
    assert "one sample per response" in found.note


def test_judges_disagreement_is_the_sd_of_the_runs_means():
    found = u.judges([{"a": [2.0, 4.0], "b": [3.0, 3.0]}, {"a": [4.0, 4.0]}, {"a": [1.0, 4.0]}])
    assert found.source == "judges"
    # (sqrt(2) + 0) / 2; 0; sd([1, 4]) = 3 / sqrt(2): squares 1/2, 0, 9/2, mean m = 5/3,
    # figures sqrt(m + s^2)
    assert found.values.tolist() == pytest.approx(
        [math.sqrt(5 / 3 + 1 / 2), math.sqrt(5 / 3), math.sqrt(5 / 3 + 9 / 2)]
    )
    assert u.judges([{"a": [3.0]}, {"a": [2.0]}]).source == "uniform"


#: One skill; (Y, Yhat) = (2, 2), (4, 3), (3, 4) labeled; Yhat 2, 3, 5 unlabeled.
YHAT = [{"A": 2.0}, {"A": 3.0}, {"A": 4.0}, {"A": 2.0}, {"A": 3.0}, {"A": 5.0}]
LABELS = [{"A": 2.0}, {"A": 4.0}, {"A": 3.0}, {}, {}, {}]


def test_calibration_by_hand_on_one_skill():
    """The line of Y on Yhat: mean Y = 3, mean Yhat = 3, Cov = (1 + 0 + 0) / 3 = 1/3, Var(Yhat)
    = 2/3: lambda = 0.5, c = 3 - 1.5 = 1.5. Residuals Y - 0.5 Yhat - 1.5 = -0.5, 1, -0.5;
    squared 0.25, 1, 0.25; m_all = 0.5; with shrinkage 1, m_A = (1.5 + 0.5) / 4 = 0.5,
    level 2: (0.25 + 0.5) / 2 = 0.375, level 3: (1 + 0.5) / 2 = 0.75, level 5 (no label):
    m_A = 0.5. Figures: their square roots."""
    found = u.calibration(YHAT, LABELS, [3, 4, 5], min_labels=2, shrinkage=1.0)
    assert found.source == "calibration" and found.labels == 3
    assert found.values.tolist() == pytest.approx(
        [math.sqrt(0.375), math.sqrt(0.75), math.sqrt(0.5)], abs=1e-12
    )
    fit = found.fit["A"]
    assert fit["lambda"] == pytest.approx(0.5, abs=1e-12)
    assert fit["offset"] == pytest.approx(1.5, abs=1e-12)
    assert fit["labels"] == 3 and fit["rms"]["4"] == pytest.approx(math.sqrt(0.375), abs=1e-12)


def test_the_prediction_line_clips_its_slope_to_0_1_and_refits_the_offset():
    assert u.prediction_line([(2.0, 2.0), (4.0, 3.0), (3.0, 4.0)]) == pytest.approx((0.5, 1.5))
    # slope 2 clipped to 1: c = mean Y - mean Yhat = 3 - 2
    assert u.prediction_line([(1.0, 1.0), (5.0, 3.0)]) == pytest.approx((1.0, 1.0))
    # a negative slope clipped to 0: c = mean Y
    assert u.prediction_line([(5.0, 1.0), (1.0, 3.0)]) == pytest.approx((0.0, 3.0))
    assert u.prediction_line([(2.0, 3.0), (4.0, 3.0)]) == pytest.approx((0.0, 3.0))


def test_calibration_by_hand_shrinks_a_skill_with_one_label_toward_all_skills():
    """Skill B has one label (Y 3, Yhat 5): it takes the line of every skill's pairs (2, 2),
    (4, 3), (3, 4), (3, 5) [Y, Yhat]: mean Y 3, mean Yhat 3.5, Cov = (1.5 - 0.5) / 4 = 0.25,
    Var(Yhat) = 5/4, slope 0.2, c = 3 - 0.7 = 2.3, so r_B = 3 - 1 - 2.3 = -0.3. m_all =
    (0.25 + 1 + 0.25 + 0.09) / 4; m_B = (0.09 + m_all) / 2; B at level 5: (0.09 + m_B) / 2.
    A keeps its own line: m_A = (1.5 + m_all) / 4, level 2: (0.25 + m_A) / 2."""
    yhat = [{"A": 2.0, "B": 5.0}, *YHAT[1:]]
    labels = [{"A": 2.0, "B": 3.0}, *LABELS[1:]]
    m_all = (0.25 + 1 + 0.25 + 0.09) / 4
    m_a, m_b = (1.5 + m_all) / 4, (0.09 + m_all) / 2
    found = u.calibration(yhat, labels, [0, 3], min_labels=2, shrinkage=1.0)
    assert found.fit["B"]["lambda"] == pytest.approx(0.2, abs=1e-12)
    assert found.fit["B"]["offset"] == pytest.approx(2.3, abs=1e-12)
    assert found.fit["A"]["lambda"] == pytest.approx(0.5, abs=1e-12)
    assert found.fit["B"]["rms"]["5"] == pytest.approx(math.sqrt((0.09 + m_b) / 2), abs=1e-12)
    assert found.fit["B"]["rms"]["1"] == pytest.approx(math.sqrt(m_b), abs=1e-12)
    level_2_a = math.sqrt((0.25 + m_a) / 2)
    assert found.values.tolist() == pytest.approx(
        [(level_2_a + math.sqrt((0.09 + m_b) / 2)) / 2, level_2_a], abs=1e-12
    )


def test_calibration_on_too_few_labels_falls_back_to_the_spread_then_uniform():
    samples = [{}] * 3 + [{(1, "A"): [2, 3]}, {(1, "A"): [4, 4]}, {(1, "A"): [1, 5]}]
    found = u.calibration(YHAT, LABELS, [3, 4, 5], samples=samples, min_labels=4)
    assert found.source == "spread"
    assert found.note.startswith("calibration needs 4 labeled responses, there are 3")
    # spreads sqrt(1/2), 0, sqrt(8): mean square m = 17/6, figures sqrt(m + s^2)
    m = (0.5 + 0 + 8) / 3
    assert found.values.tolist() == pytest.approx(
        [math.sqrt(m + 0.5), math.sqrt(m), math.sqrt(m + 8)]
    )
    flat = [{(1, "A"): [3]}] * 6
    found = u.calibration(YHAT, [{}] * 6, [0, 1], samples=flat)
    assert found.source == "uniform" and "there is none yet" in found.note
    found = u.uncertainty("calibration", samples=flat, means=[{}] * 6, labels=[{}] * 6, targets=[0])
    assert found.source == "uniform"


def test_a_batch_takes_its_share_of_the_budget_left():
    assert u.batch_budget(30, 10, 100) == pytest.approx(3.0)
    assert u.batch_budget(7.5, 5, 5) == pytest.approx(5.0)  # at most its size
    assert u.batch_budget(2.5, 5, 5) == pytest.approx(2.5)  # the last batch: what is left
    with pytest.raises(ValueError):
        u.batch_budget(3, 0, 10)


def test_draws_and_the_frame_order_are_fixed_by_the_seed():
    pi = np.full(50, 0.5)
    assert (u.draw(pi, seed=3, batch=1) == u.draw(pi, seed=3, batch=1)).all()
    assert (u.draw(pi, seed=3, batch=1) != u.draw(pi, seed=3, batch=2)).any()
    order = u.frame_order([5, 1, 9, 7], seed=11)
    assert sorted(order) == [1, 5, 7, 9] and order == u.frame_order([9, 7, 5, 1], seed=11)


def test_the_design_with_refitted_calibration_gives_an_unbiased_estimate():
    """Simulation: 40 responses whose judge is wrong mostly at high scores, decided in 4
    batches of 10 within an expected budget of 12, calibration refitted on the labels drawn
    so far before each batch. Over 300 repetitions the IPW estimate (a fixed lambda and
    offset, so the estimator is exactly unbiased if the design is) averages to the true
    mean."""
    rng = np.random.default_rng(1)
    n = 40
    yhat = rng.integers(1, 6, n).astype(float)
    y = np.clip(np.round(yhat + rng.normal(0, 0.3 + (yhat >= 4) * 1.5, n)), 1, 5)
    estimates, drawn_where_wrong = [], []
    for rep in range(300):
        labels: list[dict] = [{} for _ in range(n)]
        pi, xi, spent = np.zeros(n), np.zeros(n, dtype=bool), 0.0
        for b in range(4):
            targets = list(range(b * 10, b * 10 + 10))
            share = u.batch_budget(12 - spent, 10, n - b * 10)
            figures = u.calibration([{"A": v} for v in yhat], labels, targets, min_labels=5)
            pi[targets] = inclusion_probabilities(figures.values, share, uniform_share=0.2)
            xi[targets] = u.draw(pi[targets], seed=rep, batch=b + 1)
            for i in np.flatnonzero(xi[targets]) + b * 10:
                labels[i] = {"A": y[i]}
            spent += float(pi[targets].sum())
        assert spent == pytest.approx(12.0)
        estimates.append(active_mean(yhat, pi, xi, y, lam=0.5, offset=0.0).estimate)
        drawn_where_wrong.append(pi[30:][yhat[30:] >= 4].mean() - pi[30:][yhat[30:] < 4].mean())
    se = np.std(estimates) / math.sqrt(len(estimates))
    assert abs(np.mean(estimates) - y.mean()) < 4 * se
    assert np.mean(drawn_where_wrong) > 0  # the last batch favours the judge's high scores


# --- on a campaign --------------------------------------------------------------------------


def judge_run(project, dataset, name, score, *, samples=1, status=RunStatus.DONE):
    """A pointwise run of a baseline judge `name` over the dataset whose sample k scores a
    response on a skill `score(response, skill name, k)` (None: N/A)."""
    judge = judge_config_create(
        project=project, name=name, kind=JudgeKind.BASELINE, baseline="token-f1"
    )
    run = JudgeRun.objects.create(judge=judge, dataset=dataset, status=status)
    skills = list(Skill.objects.filter(project__isnull=True, name__in=SKILLS))
    for response in Response.objects.filter(item__dataset=dataset).select_related("item"):
        for k in range(samples):
            judgment = Judgment.objects.create(
                run=run, response=response, sample_index=k, status=JudgmentStatus.OK
            )
            JudgeScore.objects.bulk_create(
                JudgeScore(
                    judgment=judgment,
                    run=run,
                    response=response,
                    skill=skill,
                    score=value,
                    is_na=value is None,
                )
                for skill in skills
                for value in [score(response, skill.name, k)]
            )
    return run


def item_number(response) -> int:
    return int(response.item.external_id[1:])


def label_everything(campaign, annotator, value) -> int:
    """The annotator scores every task of the campaign left to them: `value(response)` on
    each skill. Returns how many."""
    done = 0
    while (a := assignment_claim_next(campaign=campaign, annotator=annotator)) is not None:
        v = value(a.task.response)
        scores = [ScoreInput(s.skill_id, v) for s in task_skills(assignment=a)]
        human_score_submit(assignment_id=a.pk, annotator=annotator, scores=scores)
        done += 1
    return done


def spread_score(response, skill, k):
    """Two samples that agree on even items and differ by 2 on odd ones."""
    base = 1 + item_number(response) % 3
    return base + (2 * k if item_number(response) % 2 else 0)


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path, items=10, models=("m1", "m2"))


@pytest.fixture
def campaign(project, dataset, annotator):
    return campaign_create(
        project=project,
        dataset=dataset,
        name="Sampled",
        selection="sampled",
        overlap=1,
        annotators=[annotator],
    )


@pytest.fixture
def spread_run(project, dataset):
    return judge_run(project, dataset, "sampler", spread_score, samples=2)


def _samples(campaign, batch=None):
    rows = CampaignSample.objects.filter(campaign=campaign)
    if batch is not None:
        rows = rows.filter(batch=batch)
    return list(rows.order_by("response_id"))


def _tasks(campaign):
    return sorted(Task.objects.filter(campaign=campaign).values_list("response_id", flat=True))


@pytest.mark.django_db
def test_a_batch_records_probabilities_that_sum_to_its_share_of_the_budget(
    campaign, spread_run, dataset
):
    # given a plan of 8 responses for people in batches of 10 over the 20 responses
    plan = selection_plan_create(
        campaign=campaign, run_ids=[spread_run.pk], source="spread", budget=8, batch_size=10, seed=7
    )
    everything = Response.objects.filter(item__dataset=dataset).values_list("pk", flat=True)
    assert sorted(plan.frame) == sorted(everything)
    # when
    first, created = selection_batch_draw(plan=plan, number=1)
    # then it decided the frame's first 10, within 8 * 10 / 20 = 4 expected draws
    rows = _samples(campaign, batch=1)
    assert created and sorted(r.response_id for r in rows) == sorted(plan.frame[:10])
    assert sum(r.probability for r in rows) == pytest.approx(4.0, abs=1e-9)
    assert first.budget == pytest.approx(4.0, abs=1e-9) and first.source_used == "spread"
    assert first.drawn == sum(r.drawn for r in rows) and first.size == 10
    assert first.p_min == min(r.probability for r in rows) > 0
    assert first.p_max == max(r.probability for r in rows)
    # responses the judge's samples disagree on (odd items) were likelier to go to people
    odd = {r.response_id: item_number(r.response) % 2 for r in rows}
    by_odd = {o: [r.probability for r in rows if odd[r.response_id] == o] for o in (0, 1)}
    assert min(by_odd[1]) > max(by_odd[0])
    # the last batch takes exactly what is left
    selection_batch_draw(plan=plan, number=2)
    assert sum(r.probability for r in _samples(campaign)) == pytest.approx(8.0, abs=1e-9)
    with pytest.raises(SelectionRefused, match="every response of the frame is decided"):
        selection_batch_draw(plan=plan, number=3)


@pytest.mark.django_db
def test_only_drawn_responses_get_tasks_in_a_draft_and_in_an_active_campaign(campaign, spread_run):
    plan = selection_plan_create(
        campaign=campaign,
        run_ids=[spread_run.pk],
        source="spread",
        budget=10,
        batch_size=10,
        seed=3,
    )
    selection_batch_draw(plan=plan, number=1)
    first = [s.response_id for s in _samples(campaign) if s.drawn]
    assert first and _tasks(campaign) == []  # a draft: nothing assigned
    assert campaign_activate(campaign=campaign) == len(first)
    assert _tasks(campaign) == sorted(first)
    selection_batch_draw(plan=plan, number=2)  # active: its tasks at once
    drawn = [s.response_id for s in _samples(campaign) if s.drawn]
    assert _tasks(campaign) == sorted(drawn) and len(drawn) > len(first)
    assert len(_samples(campaign)) == 20


@pytest.mark.django_db
def test_replanning_after_labels_moves_probability_to_where_the_judge_is_wrong(
    project, tmp_path, annotator, researcher_client
):
    # given 40 responses: the judge agrees with people on m1 (1, 2, 4 or 5) and says 3 on
    # every m2 response, where people say 1 on odd items and 5 on even ones
    dataset = make_dataset(project, tmp_path, items=20, models=("m1", "m2"))

    def human(response):
        if response.model_name == "m1":
            return [1, 2, 4, 5][item_number(response) % 4]
        return 1 if item_number(response) % 2 else 5

    run = judge_run(
        project,
        dataset,
        "judge",
        lambda r, skill, k: human(r) if r.model_name == "m1" else 3,
    )
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="S",
        selection="sampled",
        overlap=1,
        annotators=[annotator],
    )
    campaign_activate(campaign=campaign)
    plan = selection_plan_create(
        campaign=campaign, run_ids=[run.pk], source="calibration", budget=36, batch_size=20, seed=5
    )
    # when batch 1 is drawn with no label in (calibration falls back: one sample, uniform)
    first, _ = selection_batch_draw(plan=plan, number=1)
    assert first.source_used == "uniform" and "there is none yet" in first.note
    assert first.p_min == pytest.approx(first.p_max) == pytest.approx(0.9)
    labeled = label_everything(campaign, annotator, human)
    assert labeled == first.drawn >= 10
    # and the plan is changed for later batches: 6 more responses expected
    selection_plan_update(plan=plan, budget=18 + 6)
    second, _ = selection_batch_draw(plan=plan, number=2)
    # then the refitted model sends people the m2 responses rather than the m1 ones
    assert second.source_used == "calibration" and second.labels == labeled
    assert second.plan_budget == 24 and first.plan_budget == 36
    rows = _samples(campaign, batch=2)
    model = dict(
        Response.objects.filter(pk__in=[r.response_id for r in rows]).values_list(
            "pk", "model_name"
        )
    )
    p = {m: [r.probability for r in rows if model[r.response_id] == m] for m in ("m1", "m2")}
    assert min(p["m2"]) > max(p["m1"])
    assert sum(r.probability for r in rows) == pytest.approx(6.0, abs=1e-9)
    assert set(second.fit) == set(SKILLS)
    factuality = second.fit["Factuality"]
    assert factuality["rms"]["3"] > max(factuality["rms"][level] for level in "1245")
    page = researcher_client.get(_page(campaign)).content.decode()
    assert re.search(r"Factuality: λ \d\.\d\d, offset -?\d\.\d\d on \d+ labels", page)
    assert "fell back from calibration" in page


@pytest.mark.django_db
def test_a_batch_asked_for_twice_is_drawn_once(campaign, spread_run):
    plan = selection_plan_create(
        campaign=campaign, run_ids=[spread_run.pk], source="spread", budget=8, batch_size=10
    )
    first, created = selection_batch_draw(plan=plan, number=1)
    again, created_again = selection_batch_draw(plan=plan, number=1)
    assert created and not created_again and again.pk == first.pk
    assert len(_samples(campaign)) == 10
    with pytest.raises(BatchStale, match="the next batch of this plan is 2, not 3"):
        selection_batch_draw(plan=plan, number=3)


@pytest.mark.django_db
def test_what_a_plan_refuses(project, campaign, dataset, spread_run, tmp_path):
    running = judge_run(project, dataset, "slow", lambda r, s, k: 3, status=RunStatus.RUNNING)
    one_sample = judge_run(project, dataset, "once", lambda r, s, k: 3)

    def refused(match, **kwargs):
        settings = {"source": "calibration", "budget": 5, "batch_size": 5, **kwargs}
        with pytest.raises(SelectionRefused, match=match):
            selection_plan_create(campaign=campaign, **settings)

    refused(
        r"run \d+ of slow is running: active selection reads finished runs only",
        run_ids=[running.pk],
    )
    refused("not a pointwise judge run over this campaign's dataset", run_ids=[10**9])
    refused("at least one finished judge run", run_ids=[])
    refused(
        "spread needs a judge asked two times or more", run_ids=[one_sample.pk], source="spread"
    )
    refused(
        "spread reads the samples of one run",
        run_ids=[spread_run.pk, one_sample.pk],
        source="spread",
    )
    refused("judges compares two runs or more", run_ids=[spread_run.pk], source="judges")
    refused("at most the frame's 20 responses", run_ids=[spread_run.pk], budget=21)
    refused("uniform share is above 0", run_ids=[spread_run.pk], uniform_share=0.0)
    every = campaign_create(project=project, dataset=dataset, name="All")
    with pytest.raises(SelectionRefused, match="selection all"):
        selection_plan_create(
            campaign=every, run_ids=[spread_run.pk], source="spread", budget=5, batch_size=5
        )
    assert not SelectionPlan.objects.exists()


@pytest.mark.django_db
def test_the_frame_holds_the_responses_every_run_scored_on_every_skill_asked(
    project, campaign, dataset
):
    # given a run with N/A here and there, that skipped Readability on item 0's responses
    def score(response, skill, k):
        return None if skill == "Factuality" else 3

    run = judge_run(project, dataset, "gappy", score)
    JudgeScore.objects.filter(
        run=run, skill__name="Readability", response__item__external_id="i0"
    ).delete()
    # when
    plan = selection_plan_create(
        campaign=campaign, run_ids=[run.pk], source="calibration", budget=5, batch_size=5
    )
    # then N/A counts as scored; a missing score leaves the response out
    assert len(plan.frame) == 18
    left_out = Response.objects.filter(item__external_id="i0", item__dataset=dataset)
    assert not set(left_out.values_list("pk", flat=True)) & set(plan.frame)


@pytest.mark.django_db
def test_the_selection_of_an_active_campaign_and_a_pairwise_one_are_refused(
    project, campaign, dataset, researcher
):
    campaign_activate(campaign=campaign)
    with pytest.raises(CampaignStateError, match="only a draft campaign can change selection"):
        campaign_update(campaign=campaign, selection="all")
    api = token_client(researcher)
    url = reverse("annotation-api:api-campaign", args=[campaign.pk])
    response = api.patch(url, {"selection": "all"}, format="json")
    assert response.status_code == 409 and "selection" in response.json()["detail"]
    assert api.get(url).json()["selection"] == "sampled"
    with pytest.raises(ValidationError, match="only a pointwise campaign"):
        campaign_create(
            project=project, dataset=dataset, name="P", mode="pairwise", selection="sampled"
        )
    response = api.post(
        reverse("annotation-api:api-campaign-list", args=[project.slug]),
        {"name": "P", "dataset": dataset.pk, "mode": "pairwise", "selection": "sampled"},
        format="json",
    )
    assert response.status_code == 400 and "pointwise" in response.json()["detail"]


@pytest.mark.django_db
def test_the_sampling_design_is_what_the_batches_recorded(campaign, spread_run, project):
    plan = selection_plan_create(
        campaign=campaign, run_ids=[spread_run.pk], source="spread", budget=8, batch_size=10
    )
    selection_batch_draw(plan=plan, number=1)
    assert sampling_design(project=project) == {}  # a draft's draws are nobody's yet
    campaign_activate(campaign=campaign)
    selection_batch_draw(plan=plan, number=2)
    assert sampling_design(project=project) == {
        s.response_id: (s.probability, s.drawn) for s in _samples(campaign)
    }


# --- the page and the API ---------------------------------------------------------------------


def _page(campaign):
    return reverse("analytics:active-selection", args=[campaign.pk])


def _draw_url(campaign):
    return reverse("analytics:active-selection-draw", args=[campaign.pk])


@pytest.mark.django_db
def test_the_page_makes_the_plan_and_draws_each_batch_once(researcher_client, campaign, spread_run):
    # given the page: the finished run is offered
    page = researcher_client.get(_page(campaign))
    assert page.status_code == 200 and b"<html" in page.content
    assert f"sampler · run {spread_run.pk}".encode() in page.content
    # when the plan is made
    response = researcher_client.post(
        _page(campaign),
        {
            "runs": [spread_run.pk],
            "source": "spread",
            "budget": 8,
            "batch_size": 10,
            "uniform_percent": "20",
        },
    )
    assert response.status_code == 302
    page = researcher_client.get(_page(campaign)).content.decode()
    assert "Draw batch 1 (10 responses)" in page and 'name="batch" value="1"' in page
    # and "Draw batch 1" is clicked twice
    htmx = {"HX-Request": "true"}
    one = researcher_client.post(_draw_url(campaign), {"batch": 1}, headers=htmx)
    two = researcher_client.post(_draw_url(campaign), {"batch": 1}, headers=htmx)
    # then one batch was drawn, and both answers show it, offering batch 2
    assert SelectionBatch.objects.count() == 1 and len(_samples(campaign)) == 10
    for answer in (one, two):
        body = answer.content.decode()
        assert answer.status_code == 200 and "<html" not in body
        assert 'data-batch="1"' in body and 'name="batch" value="2"' in body
    # a stale form says so, and draws nothing
    stale = researcher_client.post(_draw_url(campaign), {"batch": 5}, headers=htmx)
    assert "the next batch of this plan is 2, not 5" in stale.content.decode()
    assert SelectionBatch.objects.count() == 1


@pytest.mark.django_db
def test_the_page_shows_a_refusal_on_the_form_and_the_plan_can_change(
    researcher_client, campaign, spread_run
):
    settings = {"runs": [spread_run.pk], "source": "judges", "budget": 8, "batch_size": 10}
    response = researcher_client.post(_page(campaign), {**settings, "uniform_percent": "20"})
    assert response.status_code == 200
    assert "judges compares two runs or more" in response.content.decode()
    assert not SelectionPlan.objects.exists()
    researcher_client.post(
        _page(campaign), {**settings, "source": "spread", "uniform_percent": "20"}
    )
    response = researcher_client.post(
        _page(campaign),
        {"source": "calibration", "budget": 12, "batch_size": 5, "uniform_percent": "50"},
    )
    assert response.status_code == 302
    plan = SelectionPlan.objects.get()
    assert (plan.source, plan.budget, plan.batch_size, plan.uniform_share) == (
        "calibration",
        12,
        5,
        0.5,
    )


@pytest.mark.django_db
def test_the_page_of_a_campaign_of_every_response_says_how_to_sample(
    researcher_client, project, dataset
):
    every = campaign_create(project=project, dataset=dataset, name="All")
    body = researcher_client.get(_page(every)).content.decode()
    assert "selection <b>all</b>" in body and "campaign-update" not in body
    detail = researcher_client.get(reverse("annotation:campaign-detail", args=[every.pk]))
    assert _page(every) not in detail.content.decode()


@pytest.mark.django_db
def test_the_campaign_page_and_form_link_to_active_selection(researcher_client, campaign):
    detail = researcher_client.get(reverse("annotation:campaign-detail", args=[campaign.pk]))
    assert _page(campaign) in detail.content.decode()
    form = researcher_client.get(reverse("annotation:campaign-update", args=[campaign.pk]))
    body = form.content.decode()
    assert _page(campaign) in body and 'value="sampled"' in body


@pytest.mark.django_db
def test_who_may_open_the_page(
    campaign, annotator_client, outsider_client, researcher_client, django_user_model
):
    other = project_create(slug="other", name="Other")
    olga = django_user_model.objects.create_user("olga", password="x")
    membership_set(project=other, user=olga, role=ProjectRole.RESEARCHER)
    olga_client = type(researcher_client)()
    olga_client.force_login(olga)
    for client, status in (
        (annotator_client, 403),
        (outsider_client, 404),
        (olga_client, 404),
        (researcher_client, 200),
    ):
        assert client.get(_page(campaign)).status_code == status
        if status != 200:
            assert client.post(_draw_url(campaign), {"batch": 1}).status_code == status
    assert researcher_client.get(_draw_url(campaign)).status_code == 405
    partial = researcher_client.get(_page(campaign), headers={"HX-Request": "true"})
    assert b"<html" not in partial.content and b'id="selection-batches"' in partial.content


@pytest.mark.django_db
def test_the_api_makes_changes_and_draws(campaign, spread_run, researcher, annotator, outsider):
    api = token_client(researcher)
    url = reverse("analytics-api:active-selection", args=[campaign.pk])
    draw = reverse("analytics-api:active-selection-draw", args=[campaign.pk])
    empty = api.get(url).json()
    assert empty["plan"] is None and empty["selection"] == "sampled"
    assert empty["blocked"] == "no plan yet"
    body = {"runs": [spread_run.pk], "source": "spread", "budget": 8, "batch_size": 10, "seed": 1}
    made = api.post(url, body, format="json")
    assert made.status_code == 201, made.json()
    assert made.json()["plan"]["frame_size"] == 20 and made.json()["next_batch"] == 1
    assert api.post(url, body, format="json").status_code == 400  # it has a plan
    changed = api.patch(url, {"budget": 9}, format="json")
    assert changed.status_code == 200 and changed.json()["plan"]["budget"] == 9
    first = api.post(draw, {"batch": 1}, format="json")
    assert first.status_code == 201 and first.json()["created"] is True
    assert first.json()["batch"]["budget"] == pytest.approx(4.5)
    replay = api.post(draw, {"batch": 1}, format="json")
    assert replay.status_code == 200 and replay.json()["batch"] == first.json()["batch"]
    stale = api.post(draw, {"batch": 7}, format="json")
    assert stale.status_code == 409 and stale.json()["code"] == "batch_stale"
    assert api.post(draw, {"batch": "x"}, format="json").status_code == 400
    state = api.get(url).json()
    assert state["decided"] == 10 and state["next_batch"] == 2 and len(state["batches"]) == 1
    assert state["spent"] == pytest.approx(4.5)
    assert token_client(annotator).get(url).status_code == 403
    assert token_client(outsider).post(draw, {"batch": 2}, format="json").status_code == 404
    assert len(_samples(campaign)) == 10


# --- from the design to an estimate -------------------------------------------------------------


@pytest.mark.django_db
def test_end_to_end_the_design_gives_an_active_estimate(project, campaign, annotator):
    # given a judge that scores 1 + the item number mod 5, people who agree on m1 and
    # score one less on m2 (at least 1)
    dataset = campaign.dataset

    def human(response):
        value = 1 + item_number(response) % 5
        return value if response.model_name == "m1" else max(1, value - 1)

    run = judge_run(project, dataset, "judge", lambda r, s, k: 1 + item_number(r) % 5, samples=2)
    campaign_activate(campaign=campaign)
    plan = selection_plan_create(
        campaign=campaign, run_ids=[run.pk], source="calibration", budget=12, batch_size=10, seed=2
    )
    # when every batch is drawn and people score what was drawn
    for number in (1, 2):
        selection_batch_draw(plan=plan, number=number)
        label_everything(campaign, annotator, human)
    # then the design covers the frame, and the IPW estimate of the mean human score is there
    design = sampling_design(project=project)
    assert sorted(design) == sorted(plan.frame)
    ids = sorted(design)
    responses = {r.pk: r for r in Response.objects.filter(pk__in=ids).select_related("item")}
    pi = [design[pk][0] for pk in ids]
    drawn = [design[pk][1] for pk in ids]
    yhat = [1 + item_number(responses[pk]) % 5 for pk in ids]
    y = [human(responses[pk]) for pk in ids]
    estimate = active_mean(yhat, pi, drawn, y)
    assert estimate.n_labeled == sum(drawn) >= 2 and estimate.n_frame == 20
    assert estimate.ci_low <= estimate.estimate <= estimate.ci_high
    # and the project report weights by the design: every row of the judge is "active"
    report = project_report(project=project, resamples=0)
    rows = [r for r in report["prediction_powered"] if r["judge"] == "judge"]
    assert len(rows) == 3 * 3  # three skills, each for m1, m2 and both
    assert {r["method"] for r in rows} == {"active"}
    both = next(r for r in rows if r["skill"] == "Factuality" and r["system"] is None)
    assert both["n_labeled"] == estimate.n_labeled
    assert both["human_only_estimate"] == pytest.approx(
        active_mean(yhat, pi, drawn, y, lam=0.0).estimate
    )


# --- two draws of the same batch at once ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_draws_of_the_same_batch_at_once_draw_it_once(campaign, spread_run):
    from tests.annotation.test_claim_concurrency import run_together

    plan = selection_plan_create(
        campaign=campaign, run_ids=[spread_run.pk], source="spread", budget=8, batch_size=10
    )
    results = run_together([lambda: selection_batch_draw(plan=plan, number=1)] * 3)
    batches = {batch.pk for batch, _ in results}
    assert len(batches) == 1 and sorted(created for _, created in results) == [False, False, True]
    assert SelectionBatch.objects.count() == 1 and len(_samples(campaign)) == 10


def test_a_judge_on_its_own_scale_is_calibrated_by_its_quintiles():
    # a 0-100 metric: every value would clip into level 5 (one level, a uniform design);
    # by its quintiles over the frame the low scores, where it errs, get their own level
    assert u.level_edges([1.0, 3.0, 5.0]) is None
    edges = u.level_edges([float(v) for v in range(0, 100)])
    assert edges is not None and len(edges) == 4
    assert (u.level_of(0.0, edges), u.level_of(99.0, edges)) == (1, 5)
    rng = np.random.default_rng(3)
    values = rng.uniform(0, 100, 400)
    truth = 1 + values / 25
    noise = np.where(values < 20, 1.5, 0.1)  # the metric is poor on its lowest fifth
    y = truth + rng.normal(0, 1, 400) * noise
    yhat = [{"A": float(v)} for v in values]
    labels = [{"A": float(t)} if k < 200 else {} for k, t in enumerate(y)]
    found = u.calibration(yhat, labels, list(range(200, 400)))
    assert found.source == "calibration"
    low = values[200:] < 15
    high = values[200:] > 30
    assert found.values[low].mean() > 3 * found.values[high].mean()
