"""Annotator quality before payment (annotation/study/quality.py, docs/QUALITY.md): the
Dawid-Skene estimator against the worked example of its paper, the score figures on a
synthetic crowd with careless workers, the researcher's rules and their flags, and the
campaign's figures read from real rows in a bounded number of queries."""

from __future__ import annotations

import time
from datetime import timedelta

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.utils import timezone

from annotation.campaigns.services import gold_pair_set, gold_task_set
from annotation.models import (
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignRubric,
    GoldScore,
    HumanScore,
    Item,
    Response,
    Task,
    TaskKind,
)
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from annotation.services.preferences import PreferenceInput, human_preference_submit
from annotation.study.quality import (
    MIN_COMPARED,
    MIN_TIMED_TASKS,
    QUALITY_RULE_DEFAULTS,
    REQUIRED_RULES,
    AnnotatorQuality,
    campaign_quality,
    dawid_skene,
    leave_one_out_medians,
    quality_flags,
    quality_rules_clean,
    score_figures,
)
from tests.annotation.test_annotate_views import build_campaign, build_dataset
from tests.annotation.test_pairwise_submit import answers as pair_answers
from tests.annotation.test_pairwise_submit import make as make_pairwise

# --- Dawid-Skene against the paper's worked example -----------------------------------------------

# Dawid & Skene (1979), Table 1: 45 patients, per patient observer 1's three ratings and
# observers 2 to 5's one each, classes 1-4.
TABLE_1 = [
    "1111111", "3334334", "1122122", "2223121", "2223222", "2223322", "1222111", "3333433",
    "2222223", "2322223", "4444444", "2223343", "1111111", "2223212", "1211111", "1112111",
    "1111111", "1111111", "2222221", "2221322", "2222222", "2222221", "2223222", "2212222",
    "1111111", "1111111", "2322222", "1111111", "1111111", "1121121", "1111111", "3333233",
    "1111111", "2222222", "2223232", "4334343", "2212232", "2323233", "3333432", "1111111",
    "1111111", "1212111", "2322222", "1211111", "2222222",
]  # fmt: skip
# Table 2: the estimated class marginals, and each observer's error rates (row: true class,
# column: the rating given), as published to two decimals.
PAPER_PRIORS = [0.40, 0.42, 0.11, 0.07]
PAPER_ERROR_RATES = [
    [[0.89, 0.11, 0, 0], [0.07, 0.88, 0.05, 0], [0, 0.34, 0.66, 0], [0, 0, 0.56, 0.44]],
    [[0.83, 0.17, 0, 0], [0.05, 0.63, 0.31, 0], [0, 0, 1, 0], [0, 0, 0, 1]],
    [[1, 0, 0, 0], [0.11, 0.79, 0.11, 0], [0, 0.40, 0.20, 0.40], [0, 0, 0.67, 0.33]],
    [[0.94, 0.06, 0, 0], [0.05, 0.84, 0.10, 0], [0, 0, 0.80, 0.20], [0, 0, 0.33, 0.67]],
    [[1, 0, 0, 0], [0.16, 0.73, 0.11, 0], [0, 0.21, 0.79, 0], [0, 0, 0.33, 0.67]],
]
# Table 4: each patient's estimated class; the three patients left in some doubt.
PAPER_CLASSES = [int(c) for c in "142222132243121111222222112111131224233111212"]
PAPER_DOUBTFUL = {7: [0.98, 0.02, 0, 0], 35: [0, 0.95, 0.05, 0], 38: [0, 0.02, 0.98, 0]}
# published to two decimals: half a unit of rounding, and a hair more
PUBLISHED = 0.006


def paper_observations():
    rows = []
    for patient, ratings in enumerate(TABLE_1):
        observers = [0, 0, 0, 1, 2, 3, 4]
        rows += [(patient, obs, int(r) - 1) for obs, r in zip(observers, ratings, strict=True)]
    return (np.array(column) for column in zip(*rows, strict=True))


def test_dawid_skene_reproduces_the_papers_estimated_error_rates_and_classes():
    items, workers, labels = paper_observations()

    fit = dawid_skene(items=items, workers=workers, labels=labels, n_classes=4)

    assert fit.converged
    assert fit.priors == pytest.approx(PAPER_PRIORS, abs=PUBLISHED)
    for observer, published in enumerate(PAPER_ERROR_RATES):
        assert fit.confusion[observer] == pytest.approx(np.array(published), abs=PUBLISHED)
    assert list(fit.labels + 1) == PAPER_CLASSES
    for patient, published in PAPER_DOUBTFUL.items():
        assert fit.posteriors[patient - 1] == pytest.approx(published, abs=PUBLISHED)
    # competence: each observer's accuracy under the estimated marginals (observer 1:
    # .40 x .89 + .42 x .88 + .11 x .66 + .07 x .44)
    assert fit.accuracy == pytest.approx([0.829, 0.779, 0.777, 0.867, 0.842], abs=0.002)


@pytest.mark.parametrize(
    ("items", "workers", "labels", "n_workers"),
    [
        ([], [], [], 3),  # nothing scored
        ([0, 1, 2], [0, 1, 2], [4, 0, 2], 3),  # one annotator per item
        ([0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1], [3] * 6, 2),  # one label throughout
        ([0, 0, 1, 1], [0, 1, 0, 1], [0, 4, 4, 0], 5),  # workers 2-4 answered nothing
        ([0], [0], [2], 1),  # a single answer
    ],
)
def test_dawid_skene_never_gives_nan_on_degenerate_input(items, workers, labels, n_workers):
    fit = dawid_skene(items=items, workers=workers, labels=labels, n_classes=5, n_workers=n_workers)

    for figure in (fit.priors, fit.confusion, fit.posteriors, fit.accuracy):
        assert np.isfinite(figure).all()
    assert fit.confusion.shape == (n_workers, 5, 5)
    assert fit.confusion.sum(axis=2) == pytest.approx(np.ones((n_workers, 5)))
    assert fit.posteriors.sum(axis=1) == pytest.approx(np.ones(len(set(items))))
    assert ((fit.accuracy >= 0) & (fit.accuracy <= 1)).all()


def test_dawid_skene_stops_at_its_iteration_limit():
    items, workers, labels = paper_observations()

    fit = dawid_skene(items=items, workers=workers, labels=labels, n_classes=4, max_iter=3)

    assert (fit.iterations, fit.converged) == (3, False)
    assert np.isfinite(fit.confusion).all()


def test_one_label_throughout_is_read_as_certain_agreement():
    fit = dawid_skene(items=[0, 0, 1, 1], workers=[0, 1, 0, 1], labels=[3, 3, 3, 3], n_classes=5)

    assert list(fit.labels) == [3, 3]
    assert fit.accuracy == pytest.approx([1, 1])


# --- the score figures on a synthetic crowd -------------------------------------------------------


def synthetic_crowd(seed: int, *, responses=300, annotators=100, overlap=3):
    """Three skills per response, `overlap` annotators per response. Careful annotators give
    the true score 65% of the time, one off 30%, two off 5%; 10 click at random and 5 give
    4 to everything. Returns rows (annotator, response, skill, score), kinds, true scores."""
    rng = np.random.default_rng(seed)
    truth = rng.choice(5, size=(responses, 3), p=[0.1, 0.2, 0.3, 0.25, 0.15])
    kinds = np.array(["careful"] * annotators, dtype=object)
    order = rng.permutation(annotators)
    kinds[order[:10]] = "random"
    kinds[order[10:15]] = "straight"
    rows = []
    for response in range(responses):
        for annotator in rng.choice(annotators, overlap, replace=False):
            for skill in range(3):
                true = truth[response, skill]
                if kinds[annotator] == "random":
                    given = rng.integers(5)
                elif kinds[annotator] == "straight":
                    given = 3
                else:
                    off = rng.choice([0, 1, 2], p=[0.65, 0.30, 0.05]) * rng.choice([-1, 1])
                    given = int(np.clip(true + off, 0, 4))
                rows.append((annotator, response, skill, given + 1))
    return np.array(rows), kinds, truth


def _auc(figure, careless):
    """The chance that a careful annotator's figure is above a careless one's."""
    good, bad = figure[~careless], figure[careless]
    return float(np.mean((good[:, None] > bad[None, :]) + 0.5 * (good[:, None] == bad[None, :])))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_careless_annotators_rank_below_careful_ones(seed):
    rows, kinds, _ = synthetic_crowd(seed)
    careless = kinds != "careful"

    figures = score_figures(
        annotators=rows[:, 0],
        responses=rows[:, 1],
        skills=rows[:, 2],
        scores=rows[:, 3],
        n_annotators=len(kinds),
    )

    competence = figures.competence
    agreement = figures.agreed_n / figures.compared_n
    share = figures.mode_n / figures.scores_n
    assert np.isfinite(competence).all()
    assert _auc(competence, careless) >= 0.97
    assert _auc(agreement, careless) >= 0.95
    assert (share[kinds == "straight"] == 1).all()
    assert share[kinds == "careful"].max() < 0.9
    # every careless annotator is below the typical careful one
    assert competence[careless].max() < np.median(competence[~careless])


def test_dawid_skene_recovers_most_true_scores_of_a_synthetic_crowd():
    rows, _, truth = synthetic_crowd(4, annotators=60, overlap=5)
    item = rows[:, 1] * 3 + rows[:, 2]
    keys, index = np.unique(item, return_inverse=True)

    fit = dawid_skene(
        items=index, workers=rows[:, 0], labels=rows[:, 3] - 1, n_classes=5, prior_strength=2
    )

    assert fit.converged
    assert np.mean(fit.labels == truth.reshape(-1)[keys]) >= 0.8


def test_the_others_median_leaves_the_score_itself_out():
    medians = leave_one_out_medians([7, 7, 7, 9, 4, 4], [1, 2, 3, 5, 2, 5])

    assert list(medians[:3]) == [2.5, 2.0, 1.5]
    assert np.isnan(medians[3])  # alone on its response and skill
    assert list(medians[4:]) == [5, 2]


# --- rules and flags ------------------------------------------------------------------------------


def test_no_rules_are_the_defaults_and_given_ones_override_them():
    assert quality_rules_clean(None) == QUALITY_RULE_DEFAULTS
    cleaned = quality_rules_clean({"min_gold_accuracy": 0.8, "min_speed_ratio": None})

    assert cleaned["min_gold_accuracy"] == 0.8
    assert cleaned["min_speed_ratio"] is None
    assert cleaned["max_attention_failed"] == QUALITY_RULE_DEFAULTS["max_attention_failed"]
    assert quality_rules_clean(cleaned) == cleaned
    assert quality_rules_clean({"min_scores_for_flags": 20.0})["min_scores_for_flags"] == 20


@pytest.mark.parametrize(
    ("rules", "key"),
    [
        ({"min_gold_acuracy": 0.6}, "min_gold_acuracy"),
        ({"min_gold_accuracy": 1.5}, "min_gold_accuracy"),
        ({"min_gold_accuracy": "0.6"}, "min_gold_accuracy"),
        ({"max_attention_failed": -1}, "max_attention_failed"),
        ({"max_attention_failed": True}, "max_attention_failed"),
        ({"max_attention_failed": 1.5}, "max_attention_failed"),
        ({"min_speed_ratio": 0}, "min_speed_ratio"),
        ({"min_median_seconds": float("nan")}, "min_median_seconds"),
        ({"max_straightline_share": 0.1}, "max_straightline_share"),
        ({"min_scores_for_flags": None}, "min_scores_for_flags"),
        ({"min_scores_for_flags": 2}, "min_scores_for_flags"),
        ({"min_tasks_for_flags": MIN_TIMED_TASKS - 1}, "min_tasks_for_flags"),
    ],
)
def test_a_bad_rule_is_refused_by_its_name(rules, key):
    with pytest.raises(ValidationError) as refused:
        quality_rules_clean(rules)

    assert list(refused.value.message_dict) == [key]
    assert key in refused.value.message_dict[key][0]


def test_only_the_minimum_n_rules_cannot_be_turned_off():
    required = {"min_gold_tasks", "min_tasks_for_flags", "min_scores_for_flags"}
    assert set(REQUIRED_RULES) == required
    for name in QUALITY_RULE_DEFAULTS.keys() - REQUIRED_RULES:
        assert quality_rules_clean({name: None})[name] is None


def test_rules_that_are_not_an_object_are_refused():
    with pytest.raises(ValidationError):
        quality_rules_clean([("min_gold_accuracy", 0.6)])


def row(**figures) -> AnnotatorQuality:
    base = dict(
        user_id=1,
        tasks_done=20,
        active_seconds=1200.0,
        median_seconds=60.0,
        speed_ratio=1.0,
        gold_n=4,
        gold_correct=4,
        attention_n=2,
        attention_failed=0,
        straightline_share=0.4,
        scores_n=60,
        agreement=0.9,
        agreement_n=60,
        competence=0.7,
        flags=(),
        timed_n=20,
    )
    return AnnotatorQuality(**(base | figures))


def test_a_careful_annotator_raises_no_flag():
    assert quality_flags(row(), None) == ()


def test_each_rule_flags_its_figure_with_a_reason():
    careless = row(
        gold_correct=1,
        attention_failed=1,
        median_seconds=6.0,
        speed_ratio=0.1,
        straightline_share=0.95,
        agreement=0.4,
        competence=0.3,
    )
    rules = {"min_median_seconds": 10, "min_agreement": 0.6, "min_competence": 0.5}

    flags = dict(quality_flags(careless, rules))

    assert set(flags) == {
        "gold",
        "attention",
        "speed_ratio",
        "median_seconds",
        "straightline",
        "agreement",
        "competence",
    }
    assert flags["gold"] == "1 of 4 gold tasks correct (25%), below the required 60%"
    assert flags["attention"] == "failed 1 of 2 attention checks (at most 0 allowed)"
    assert "0.10 times the campaign's median" in flags["speed_ratio"]
    assert flags["straightline"] == (
        "95% of 60 scores are their most common score (at or above 90%)"
    )


def test_the_same_score_everywhere_says_so():
    flags = dict(quality_flags(row(straightline_share=1.0, scores_n=30), None))

    assert flags["straightline"] == "the same score on every skill of every task (30 scores)"


def test_a_rule_set_to_none_is_off():
    careless = row(gold_correct=0, attention_failed=3, speed_ratio=0.05, straightline_share=1.0)
    off = {
        "min_gold_accuracy": None,
        "max_attention_failed": None,
        "min_speed_ratio": None,
        "max_straightline_share": None,
    }

    assert quality_flags(careless, off) == ()


def test_too_small_a_sample_raises_no_flag():
    few = row(
        gold_n=2,
        gold_correct=0,
        timed_n=4,
        speed_ratio=0.05,
        scores_n=9,
        straightline_share=1.0,
        agreement_n=9,
        agreement=0.1,
        competence=0.1,
    )
    rules = {"min_agreement": 0.6, "min_competence": 0.5}

    assert quality_flags(few, rules) == ()
    # an attention check failed once is enough: it is a count, not a share
    assert [code for code, _ in quality_flags(row(attention_failed=1, attention_n=1), None)] == [
        "attention"
    ]


def test_missing_figures_raise_no_flag():
    blank = row(median_seconds=None, speed_ratio=None, straightline_share=None, competence=None)

    assert quality_flags(blank, {"min_median_seconds": 5, "min_competence": 0.9}) == ()


# --- the campaign's figures from its rows ---------------------------------------------------------

# the true scores of the campaign's ten normal responses on its three skills
TRUTH = [(2, 4, 3), (5, 5, 4), (1, 2, 2), (3, 3, 4), (4, 5, 5), (2, 1, 1), (5, 4, 5), (1, 1, 2),
         (3, 4, 3), (2, 3, 1)]  # fmt: skip
LEASE = timedelta(minutes=10)


@pytest.fixture
def people(django_user_model):
    return [django_user_model.objects.create_user(name) for name in ("ann", "ben", "cid", "dot")]


@pytest.fixture
def campaign(project, tmp_path, people) -> Campaign:
    dataset = build_dataset(project, tmp_path, texts=[f"answer {i}" for i in range(12)])
    return build_campaign(project, dataset, annotators=people, overlap=4)


def skill_ids(campaign: Campaign) -> list[int]:
    task = Task.objects.filter(campaign=campaign).first()
    return [s.skill_id for s in task_skills(assignment=Assignment(task=task, campaign=campaign))]


def submitted(task, user, scores, *, ms=60_000, kind=AssignmentKind.NORMAL, status=None):
    """A submitted assignment of `task` with one score per skill (None: N/A)."""
    assignment = Assignment.objects.create(
        task=task,
        campaign_id=task.campaign_id,
        annotator=user,
        kind=kind,
        status=status or AssignmentStatus.SUBMITTED,
        expires_at=timezone.now() + LEASE,
        submitted_at=timezone.now(),
        active_ms=ms,
    )
    pins = dict(
        CampaignRubric.objects.filter(campaign_id=task.campaign_id).values_list(
            "skill_id", "rubric_id"
        )
    )
    HumanScore.objects.bulk_create(
        HumanScore(
            assignment=assignment,
            campaign_id=task.campaign_id,
            response_id=task.response_id,
            annotator=user,
            skill_id=skill,
            rubric_id=pins[skill],
            score=score,
            is_na=score is None,
        )
        for skill, score in scores.items()
    )
    return assignment


@pytest.fixture
def scored(campaign, people):
    """ann scores the truth, ben one off on the third skill; cid gives 4 to everything in
    two seconds; dot did one task, untimed. Gold: known 2/4/3 within one; attention: known 1 on the
    first skill only."""
    ann, ben, cid, dot = people
    skills = skill_ids(campaign)
    responses = list(Response.objects.filter(item__dataset=campaign.dataset).order_by("item_id"))
    gold = gold_task_set(
        campaign=campaign,
        response=responses[10],
        scores=dict(zip(skills, (2, 4, 3), strict=True)),
        tolerance=1,
    )
    attention = gold_task_set(
        campaign=campaign,
        response=responses[11],
        scores={skills[0]: 1},
        kind=TaskKind.ATTENTION,
    )
    tasks = list(Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL).order_by("pk"))
    for task, truth in zip(tasks, TRUTH, strict=True):
        submitted(task, ann, dict(zip(skills, truth, strict=True)), ms=60_000)
        ben_truth = (*truth[:2], min(truth[2] + 1, 5))
        submitted(task, ben, dict(zip(skills, ben_truth, strict=True)), ms=50_000)
        submitted(task, cid, dict.fromkeys(skills, 4), ms=2_000)
    submitted(tasks[0], dot, {skills[0]: 2, skills[1]: None, skills[2]: 3}, ms=None)
    submitted(gold, ann, dict(zip(skills, (2, 4, 3), strict=True)), ms=30_000)
    submitted(gold, ben, dict(zip(skills, (3, 5, 4), strict=True)), ms=30_000)  # all within one
    submitted(gold, cid, dict.fromkeys(skills, 4), ms=1_000)  # 4 for a known 2: two off
    for user, first in ((ann, 1), (ben, 1), (cid, 4)):
        submitted(attention, user, dict(zip(skills, (first, 5, 5), strict=True)), ms=10_000)
    # neither a hidden repeat nor an expired lease is a normal task done
    submitted(tasks[1], ann, dict.fromkeys(skills, 1), ms=20_000, kind=AssignmentKind.REPEAT)
    submitted(tasks[2], dot, {}, ms=90_000, status=AssignmentStatus.EXPIRED)
    return campaign


@pytest.mark.django_db
def test_each_annotator_gets_work_gold_attention_and_score_figures(
    scored, people, django_assert_max_num_queries
):
    ann, ben, cid, dot = people

    with django_assert_max_num_queries(3):
        quality = campaign_quality(campaign=scored)

    assert list(quality) == sorted(p.pk for p in people)
    a, b, c, d = (quality[p.pk] for p in people)
    # work: tasks done, every submitted second, median per timed normal task, its ratio
    assert (a.tasks_done, b.tasks_done, c.tasks_done, d.tasks_done) == (10, 10, 10, 1)
    assert a.active_seconds == 600 + 30 + 10 + 20  # normal, gold, attention, repeat
    assert d.active_seconds == 0  # no time recorded; the expired lease is not work
    assert (a.median_seconds, b.median_seconds, c.median_seconds) == (60, 50, 2)
    assert a.speed_ratio == pytest.approx(60 / 50)  # the campaign's median: 50 s
    assert c.speed_ratio == pytest.approx(2 / 50)
    assert (a.timed_n, d.timed_n) == (10, 0)
    # gold within its tolerance; attention on its one known skill
    assert [(q.gold_n, q.gold_correct) for q in (a, b, c, d)] == [(1, 1), (1, 1), (1, 0), (0, 0)]
    assert [(q.attention_n, q.attention_failed) for q in (a, b, c)] == [(1, 0), (1, 0), (1, 1)]
    # scores: normal tasks only, N/A left out
    assert (a.scores_n, c.scores_n, d.scores_n) == (30, 30, 1 + 1)
    assert c.straightline_share == 1.0
    assert a.straightline_share < 0.5
    assert (a.agreement_n, c.agreement_n, d.agreement_n) == (30, 30, 2)
    # with two others, their median is their mean: cid pulls ann's reference too, and
    # the competence model, weighing each annotator, tells them apart more clearly
    assert c.agreement < min(a.agreement, b.agreement)
    assert c.competence < 0.5 < min(a.competence, b.competence) <= 1


@pytest.mark.django_db
def test_the_default_rules_flag_the_careless_annotator_only(scored, people):
    ann, ben, cid, dot = people

    quality = campaign_quality(campaign=scored)

    assert quality[ann.pk].flags == () and quality[ben.pk].flags == ()
    assert [code for code, _ in quality[cid.pk].flags] == [
        "attention",
        "speed_ratio",
        "straightline",
    ]  # one gold task is too few for the gold rule (min_gold_tasks: 3)
    assert quality[dot.pk].flags == ()


@pytest.mark.django_db
def test_the_researchers_rules_change_the_flags(scored, people):
    cid = people[2]

    quality = campaign_quality(
        campaign=scored,
        rules={"min_gold_tasks": 1, "min_median_seconds": 5, "min_agreement": 0.8},
    )

    codes = [code for code, _ in quality[cid.pk].flags]
    assert codes == ["gold", "attention", "speed_ratio", "median_seconds", "straightline",
                     "agreement"]  # fmt: skip
    with pytest.raises(ValidationError):
        campaign_quality(campaign=scored, rules={"min_gold_accuracy": 2})


@pytest.mark.django_db
def test_a_figure_below_its_minimum_is_none_with_the_reason(scored, people):
    dot = campaign_quality(campaign=scored)[people[3].pk]

    assert (dot.median_seconds, dot.speed_ratio) == (None, None)
    assert (dot.straightline_share, dot.agreement, dot.competence) == (None, None, None)
    notes = dict(dot.notes)
    assert (
        notes["median_seconds"]
        == f"0 timed normal tasks; a median needs at least {MIN_TIMED_TASKS}"
    )
    assert notes["straightline_share"] == "2 numeric scores; the share needs at least 5"
    assert notes["competence"] == (
        f"2 of their scores are of responses someone else scored too; it needs at least "
        f"{MIN_COMPARED}"
    )


@pytest.mark.django_db
def test_an_annotator_who_submitted_nothing_is_not_listed(campaign, people):
    task = Task.objects.filter(campaign=campaign).first()
    submitted(task, people[0], {}, status=AssignmentStatus.ACTIVE)

    assert campaign_quality(campaign=campaign) == {}


@pytest.mark.django_db
def test_claimed_and_submitted_work_is_counted(project, tmp_path, people):
    # given a campaign serving every second task from gold
    dataset = build_dataset(project, tmp_path, texts=[f"t{i}" for i in range(5)], name="Flow")
    campaign = build_campaign(project, dataset, annotators=people[:2], overlap=2, gold_rate=0.5)
    skills = skill_ids(campaign)
    response = Response.objects.filter(item__dataset=dataset).order_by("item_id").last()
    gold_task_set(campaign=campaign, response=response, scores={skills[0]: 5})
    # when each annotator claims and submits four tasks, always scoring 3
    for user in people[:2]:
        for _ in range(4):
            lease = assignment_claim_next(campaign=campaign, annotator=user)
            human_score_submit(
                assignment_id=lease.pk,
                annotator=user,
                scores=[ScoreInput(s, 3) for s in skills],
                active_ms=40_000,
            )
    # then
    quality = campaign_quality(campaign=campaign)
    for user in people[:2]:
        figures = quality[user.pk]
        assert (figures.tasks_done, figures.gold_n, figures.gold_correct) == (3, 1, 0)
        assert figures.active_seconds == 160
        assert figures.median_seconds == 40
        assert figures.scores_n == 9


@pytest.mark.django_db
def test_a_pairwise_campaigns_gold_pairs_are_judged_by_their_known_choice(project, tmp_path):
    people = [get_user_model().objects.create_user(f"p{i}") for i in range(2)]
    campaign = make_pairwise(project, tmp_path, people, items=3, overlap=1, gold_rate=0.5)
    task = Task.objects.filter(campaign=campaign).order_by("pk").first()
    gold_pair_set(
        campaign=campaign,
        response_a=task.response,
        response_b=task.response_b,
        choices={None: "a"},
        kind=TaskKind.ATTENTION,
    )
    for person, choice in ((people[0], "a"), (people[1], "b")):
        for _ in range(2):
            lease = assignment_claim_next(campaign=campaign, annotator=person)
            human_preference_submit(
                assignment_id=lease.pk,
                annotator=person,
                preferences=[PreferenceInput(p.skill_id, choice) for p in pair_answers(lease)],
            )

    quality = campaign_quality(campaign=campaign)

    right, wrong = quality[people[0].pk], quality[people[1].pk]
    assert (right.attention_n, right.attention_failed) == (1, 0)
    assert (wrong.attention_n, wrong.attention_failed) == (1, 1)
    assert right.tasks_done == 1 and right.scores_n == 0
    assert dict(right.notes)["agreement"] == "a pairwise campaign has preferences, not scores"
    assert [code for code, _ in wrong.flags] == ["attention"]


# --- at the size of a large crowd study -----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db
def test_two_thousand_annotators_take_three_queries(
    project, tmp_path, django_assert_max_num_queries
):
    # given 2,000 annotators, each scoring 3 of 2,000 responses (3 per response) on 3
    # skills and answering one gold task
    workers = 2_000
    dataset = build_dataset(project, tmp_path, texts=["seed"], name="Crowd")
    campaign = build_campaign(project, dataset, overlap=3)
    skills = skill_ids(campaign)
    pins = dict(
        CampaignRubric.objects.filter(campaign=campaign).values_list("skill_id", "rubric_id")
    )
    users = get_user_model().objects.bulk_create(
        get_user_model()(username=f"crowd-{i}", password="!") for i in range(workers)
    )
    items = Item.objects.bulk_create(
        Item(dataset=dataset, external_id=f"c{i}", instruction="q") for i in range(workers)
    )
    responses = Response.objects.bulk_create(
        Response(item=item, model_name="m", text="a") for item in items
    )
    tasks = Task.objects.bulk_create(
        Task(campaign=campaign, response=r, kind=TaskKind.NORMAL, overlap=3) for r in responses
    )
    gold = Task.objects.filter(campaign=campaign).first()
    Task.objects.filter(pk=gold.pk).update(kind=TaskKind.GOLD)
    GoldScore.objects.bulk_create(GoldScore(task=gold, skill_id=s, score=3) for s in skills)
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 6, size=(workers, 3))
    expires = timezone.now() + LEASE
    work = [(tasks[(i + k) % workers], user) for i, user in enumerate(users) for k in range(3)]
    work += [(gold, user) for user in users]
    assignments = Assignment.objects.bulk_create(
        Assignment(
            task=task,
            campaign=campaign,
            annotator=user,
            status=AssignmentStatus.SUBMITTED,
            expires_at=expires,
            active_ms=int(rng.integers(5_000, 120_000)),
        )
        for task, user in work
    )
    position = {task.pk: i for i, task in enumerate(tasks)}
    HumanScore.objects.bulk_create(
        (
            HumanScore(
                assignment=a,
                campaign=campaign,
                response_id=task.response_id,
                annotator=user,
                skill_id=skill,
                rubric_id=pins[skill],
                score=int(np.clip(truth[position.get(task.pk, 0), k] + rng.integers(-1, 2), 1, 5)),
            )
            for a, (task, user) in zip(assignments, work, strict=True)
            for k, skill in enumerate(skills)
        ),
        batch_size=5_000,
    )

    # when
    started = time.perf_counter()
    with django_assert_max_num_queries(3):
        quality = campaign_quality(campaign=campaign)
    took = time.perf_counter() - started

    # then
    assert len(quality) == workers
    some = quality[users[0].pk]
    assert (some.tasks_done, some.gold_n, some.scores_n, some.agreement_n) == (3, 1, 9, 9)
    assert some.competence is not None
    print(f"campaign_quality for {workers} annotators: {took:.2f} s")
