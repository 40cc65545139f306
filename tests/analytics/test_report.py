"""The analytics report: from plain rows (checked against the coefficients computed by hand
or by scipy on the same numbers), and end to end from a project's real human scores and a
judge run, through the command and the API."""

from __future__ import annotations

import json
from fractions import Fraction
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from scipy import stats

from analytics import metrics
from analytics.report.build import build_report, human_means, mean_of_means
from analytics.report.selectors import project_report
from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from devtools.openai_server import FakeOpenAIServer
from judging.services import judge_batch, judge_run_create
from tests.analytics.snapshot_worker import report_via_api
from tests.annotation.test_assignments import make_dataset
from tests.clients import token_client
from tests.judging.test_runs import llm_judge, response_ids, running

# response id, item id, system, skill, rater, value
HUMAN = [
    (1, 10, "a", "Readability", "ann", 4),
    (1, 10, "a", "Readability", "bob", 5),
    (2, 10, "b", "Readability", "ann", 2),
    (2, 10, "b", "Readability", "bob", 1),
    (3, 11, "a", "Readability", "ann", 5),
    (3, 11, "a", "Readability", "bob", 4),
    (4, 11, "b", "Readability", "ann", 3),
    (4, 11, "b", "Readability", "bob", None),
    (5, 12, "a", "Readability", "ann", 3),
    (5, 12, "a", "Readability", "bob", 3),
    (6, 12, "b", "Readability", "ann", 1),
    (6, 12, "b", "Readability", "bob", 2),
]
JUDGE = [
    (1, 10, "a", "Readability", "J", 5),
    (2, 10, "b", "Readability", "J", 2),
    (3, 11, "a", "Readability", "J", 4),
    (4, 11, "b", "Readability", "J", 3),
    (5, 12, "a", "Readability", "J", 2),
    (6, 12, "b", "Readability", "J", 1),
]


def test_human_means_are_exact_and_leave_na_out():
    means = human_means(HUMAN)
    assert means[1] == (10, "a", 4.5, 9, 2)
    assert means[4] == (11, "b", 3.0, 3, 1)  # bob's N/A is not a zero
    # equal rationals from different counts are the same float
    more = [(9, 1, "x", "S", r, v) for r, v in (("p", 1), ("q", 2), ("r", 3), ("s", 2))]
    assert human_means(more)[9][2] == 2.0
    # a mean of means is exact: 1/3 + 2/6 + 1/2 over 3 is 7/18, rounded once
    assert mean_of_means([(1, 3), (2, 6), (1, 2)]) == 7 / 18
    assert mean_of_means([(Fraction(0.1), 1), (Fraction(0.2), 1)]) == float(
        (Fraction(0.1) + Fraction(0.2)) / 2
    )


def test_agreement_uses_the_reliability_matrix_of_the_skill():
    report = build_report(HUMAN, [])
    got = report["agreement"]["Readability"]
    matrix = np.array([[4, 2, 5, 3, 3, 1], [5, 1, 4, np.nan, 3, 2]])
    assert got["n_units"] == 5 and got["n_raters"] == 2 and got["n_na"] == 1
    for level in metrics.ALPHA_LEVELS:
        assert got["krippendorff_alpha"][level] == pytest.approx(
            metrics.krippendorff_alpha(matrix, level)
        )
    counts, _ = metrics.category_counts(matrix, categories=[1, 2, 3, 4, 5])
    assert got["gwet_ac1"] == pytest.approx(metrics.gwet_ac1(counts, n_categories=5))
    assert got["fleiss_kappa"] == pytest.approx(metrics.fleiss_kappa(counts))
    for weights in metrics.KAPPA_WEIGHTS:
        assert got["cohen_kappa"][weights] == pytest.approx(
            metrics.cohen_kappa(matrix[0], matrix[1], weights, categories=[1, 2, 3, 4, 5])
        )
    complete = matrix[:, ~np.isnan(matrix).any(axis=0)]
    assert got["icc"]["design"] == "complete"
    assert got["icc"]["ICC2"] == pytest.approx(metrics.icc(complete.T).ICC2)
    both = ~np.isnan(matrix[1])
    assert got["mean_pairwise_spearman"]["value"] == pytest.approx(
        stats.spearmanr(matrix[0][both], matrix[1][both]).statistic
    )


def test_correlation_at_the_instance_item_and_system_levels():
    report = build_report(HUMAN, JUDGE)
    got = report["correlation"]["J"]["Readability"]
    human = [4.5, 1.5, 4.5, 3.0, 3.0, 1.5]
    judge = [5, 2, 4, 3, 2, 1]
    assert got["instance"]["n"] == 6
    assert got["instance"]["pearson"] == pytest.approx(stats.pearsonr(human, judge).statistic)
    assert got["instance"]["kendall"] == pytest.approx(
        stats.kendalltau(human, judge, variant="b").statistic
    )
    assert got["instance"]["mae"] == pytest.approx(np.mean(np.abs(np.subtract(human, judge))))
    # item level: two responses per item -> each item's correlation is +1 or -1 (or undefined)
    per_item = []
    for i in (0, 2, 4):
        h, j = human[i : i + 2], judge[i : i + 2]
        per_item.append(
            stats.pearsonr(h, j).statistic if len(set(h)) > 1 and len(set(j)) > 1 else None
        )
    used = [v for v in per_item if v is not None]
    assert got["item"]["n"] == len(used) and got["item"]["items_skipped"] == 3 - len(used)
    assert got["item"]["pearson"] == pytest.approx(np.mean(used))
    # system level: per-system means of the responses both sides scored
    assert got["system"]["systems"] == ["a", "b"]
    assert got["system"]["n"] == 2 and got["system"]["pearson"] == pytest.approx(1.0)


@pytest.fixture
def scored_project(project, tmp_path, django_user_model):
    """Three annotators score every response of a small campaign; a judge (the local
    OpenAI-compatible server) scores the dataset."""
    people = [django_user_model.objects.create_user(f"r{i}", password="x") for i in range(3)]
    dataset = make_dataset(project, tmp_path, items=4, models=("m1", "m2"))
    campaign = campaign_create(
        project=project, dataset=dataset, name="C", overlap=3, annotators=people
    )
    campaign_activate(campaign=campaign)
    for n, person in enumerate(people):
        while (a := assignment_claim_next(campaign=campaign, annotator=person)) is not None:
            scores = [
                ScoreInput(s.skill_id, 1 + (a.task_id * 7 + s.skill_id * 3 + n) % 5)
                for s in task_skills(assignment=a)
            ]
            human_score_submit(assignment_id=a.pk, annotator=person, scores=scores)
    with FakeOpenAIServer(style="json") as server:
        judge = llm_judge(project, server, name="rouge")
        run = running(judge_run_create(judge=judge, dataset=dataset))
        # every response in one batch, as a worker's task judges them: one engine round trip
        judge_batch(run_id=run.pk, response_ids=response_ids(run))
    return project


def test_a_project_report_from_real_scores(scored_project):
    report = project_report(project=scored_project)
    assert report["project"] == scored_project.slug
    assert set(report["agreement"]) == {"Factuality", "Readability", "Comprehension"}
    for skill, figures in report["agreement"].items():
        assert figures["n_raters"] == 3 and figures["n_units"] == 8, skill
        assert set(figures["krippendorff_alpha"]) == set(metrics.ALPHA_LEVELS)
        assert figures["icc"]["design"] == "complete" and figures["icc"]["k"] == 3
    assert list(report["correlation"]) == ["rouge"]
    for skill, levels in report["correlation"]["rouge"].items():
        assert set(levels) == {"instance", "item", "system"}, skill
        assert levels["instance"]["n"] == 8
    json.dumps(report)  # JSON-ready: no NaN, no numpy types


def test_the_command_and_the_api_return_the_same_report(
    scored_project, researcher, annotator, outsider
):
    out = StringIO()
    call_command("analytics_report", "--project", scored_project.slug, stdout=out)
    from_command = json.loads(out.getvalue())
    url = f"/api/v1/projects/{scored_project.slug}/analytics/report"

    client = token_client

    assert report_via_api(client(researcher), url) == from_command
    only = report_via_api(client(researcher), url, {"skill": "Readability", "judge": "rouge"})
    assert list(only["agreement"]) == ["Readability"]
    assert list(only["correlation"]["rouge"]) == ["Readability"]
    assert client(annotator).get(url).status_code == 403
    assert client(outsider).get(url).status_code == 404


def test_intervals_and_the_judge_comparison_come_with_resamples():
    second = [(r[0], r[1], r[2], r[3], "K", 6 - r[5]) for r in JUDGE]  # the opposite judge
    report = build_report(HUMAN, JUDGE + second, resamples=300)
    assert report["resamples"] == 300
    alpha = report["agreement"]["Readability"]
    for level, interval in alpha["krippendorff_alpha_ci"].items():
        assert interval["estimate"] == pytest.approx(alpha["krippendorff_alpha"][level])
        assert interval["low"] <= interval["estimate"] <= interval["high"]
    instance = report["correlation"]["J"]["Readability"]["instance"]
    assert instance["ci"]["pearson"]["estimate"] == pytest.approx(instance["pearson"])
    assert instance["ci"]["spearman"]["estimate"] == pytest.approx(instance["spearman"])
    compared = report["judge_comparison"]["Readability"]["J vs K"]
    j = report["correlation"]["J"]["Readability"]["instance"]["pearson"]
    k = report["correlation"]["K"]["Readability"]["instance"]["pearson"]
    assert compared["n"] == 6 and compared["estimate"] == pytest.approx(j - k)
    assert compared["estimate"] > 0 and compared["p_value_a_not_better"] <= 0.05
    assert "judge_comparison" not in build_report(HUMAN, JUDGE + second)  # no resamples


def test_the_api_refuses_a_bad_resample_count(scored_project, researcher):
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION="Token " + Token.objects.get_or_create(user=researcher)[0].key
    )
    url = f"/api/v1/projects/{scored_project.slug}/analytics/report"
    assert client.get(url, {"resamples": "many"}).status_code == 400
    assert client.get(url, {"resamples": 20001}).status_code == 400
    with_ci = report_via_api(client, url, {"resamples": 50})
    assert with_ci["resamples"] == 50
    some = next(iter(with_ci["correlation"]["rouge"].values()))
    assert some["instance"]["ci"]["pearson"]["resamples"] <= 50


def test_imported_long_format_scores_feed_the_report(db):
    from analytics.imports.services import scores_import
    from annotation.models import Project

    rows = ["item,system,rater,rater_kind,skill,score"]
    human = {
        ("q1", "a"): (4, 5),
        ("q1", "b"): (2, 1),
        ("q2", "a"): (5, 4),
        ("q2", "b"): (1, 2),
        ("q3", "a"): (3, 3),
        ("q3", "b"): (2, 3),
    }
    metric = {
        ("q1", "a"): 0.91,
        ("q1", "b"): 0.2,
        ("q2", "a"): 0.8,
        ("q2", "b"): 0.35,
        ("q3", "a"): 0.5,
        ("q3", "b"): 0.3,
    }
    for (item, system), (p, q) in human.items():
        rows.append(f"{item},{system},p1,human,Readability,{p}")
        rows.append(f"{item},{system},p2,human,Readability,{q}")
        rows.append(f"{item},{system},bleu-ish,judge,Readability,{metric[item, system]}")
    scores_import(
        project_slug="imported",
        files=[("scores.csv", "\n".join(rows).encode())],
        judge_scale_raw=True,
        create_project=True,
    )
    report = project_report(project=Project.objects.get(slug="imported"), resamples=0)
    agreement = report["agreement"]["Readability"]
    assert agreement["n_raters"] == 2 and agreement["n_units"] == 6
    got = report["correlation"]["bleu-ish"]["Readability"]["instance"]
    keys = sorted(human)
    means = [sum(human[k]) / 2 for k in keys]
    assert got["pearson"] == pytest.approx(
        stats.pearsonr(means, [metric[k] for k in keys]).statistic
    )
    # a raw metric is not on the 1-5 scale: no MAE or exact agreement for it
    assert got["mae"] is None and got["exact"] is None and got["judge_scale"] == "raw"


def test_the_leaderboard_ranks_systems_by_exact_means():
    from analytics.report.build import leaderboard

    table = leaderboard(HUMAN, JUDGE)
    assert [r["system"] for r in table] == ["a", "b"]
    a, b = table
    assert a["humans"] == pytest.approx(4.0) and b["humans"] == pytest.approx(2.0)
    assert a["judges"]["J"]["mean"] == pytest.approx(11 / 3)
    assert b["judges"]["J"]["mean"] == pytest.approx(2.0)
    ranks = (a["humans_rank"], b["humans_rank"], a["judges"]["J"]["rank"], b["judges"]["J"]["rank"])
    assert ranks == (1, 2, 1, 2)
    # equal means reached through different counts (1/3 of 3 and 2/6 of ...) tie exactly
    rows = [
        (1, 1, "x", "S", "p", 1),
        (2, 2, "x", "S", "p", 2),
        (3, 3, "y", "S", "p", 1),
        (4, 4, "y", "S", "p", 2),
        (5, 5, "y", "S", "p", 1),
        (6, 6, "y", "S", "p", 2),
    ]
    tied = leaderboard(rows, [])
    assert tied[0]["humans"] == tied[1]["humans"] == 1.5
    # a judge named like a key of the row stays a judge
    named = leaderboard(HUMAN, [(*r[:4], "humans", r[5]) for r in JUDGE])
    assert named[0]["humans"] == pytest.approx(4.0)
    assert named[0]["judges"]["humans"]["mean"] == pytest.approx(11 / 3)
    assert tied[0]["humans_rank"] == tied[1]["humans_rank"] == 1


def test_groups_with_equal_exact_means_tie_when_their_totals_are_fractions():
    # given exact (Fraction) totals: group a's two parts and group b's one part have the
    # same exact mean, but rounding each total to a float first would tell them apart
    from analytics.report.build import group_means

    x, y = Fraction(70446, 298427), Fraction(888599, 841236)

    # when the group means are taken
    means = group_means(["a", "a", "b"], [x, y, x + y], [1, 1, 2])

    # then they are one float, the correctly rounded exact mean
    assert means["a"] == means["b"] == float((x + y) / 2)


def test_breakdowns_and_filters(scored_project):
    report = project_report(project=scored_project, resamples=0)
    overall = report["correlation"]["rouge"]["Readability"]["instance"]["n"]
    by = report["breakdowns"]
    assert set(by) == {"domain", "difficulty", "system"}
    assert list(by["domain"]) == ["History"] and list(by["difficulty"]) == ["2"]
    assert (
        by["domain"]["History"]["correlation"]["rouge"]["Readability"]["instance"]["n"] == overall
    )
    assert sorted(by["system"]) == ["m1", "m2"]
    assert by["system"]["m1"]["correlation"]["rouge"]["Readability"]["instance"]["n"] == 4
    assert [r["system"] for r in report["leaderboard"]["Readability"]] in (
        ["m1", "m2"],
        ["m2", "m1"],
    )
    only_m2 = project_report(
        project=scored_project, resamples=0, systems=["m2"], with_breakdowns=False
    )
    assert only_m2["correlation"]["rouge"]["Readability"]["instance"]["n"] == 4
    assert "breakdowns" not in only_m2
    none = project_report(project=scored_project, resamples=0, difficulties=[5])
    assert none["agreement"] == {} and none["correlation"] == {}


def test_the_api_filters_like_the_command(scored_project, researcher):
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION="Token " + Token.objects.get_or_create(user=researcher)[0].key
    )
    url = f"/api/v1/projects/{scored_project.slug}/analytics/report"
    params = {"system": "m1", "difficulty": 2, "domain": "History", "resamples": 0, "breakdowns": 0}
    body = report_via_api(client, url, params)
    out = StringIO()
    call_command(
        "analytics_report",
        "--project",
        scored_project.slug,
        "--system",
        "m1",
        "--difficulty",
        "2",
        "--domain",
        "History",
        "--resamples",
        "0",
        "--no-breakdowns",
        stdout=out,
    )
    assert body == json.loads(out.getvalue())
    assert "breakdowns" not in body
    assert body["correlation"]["rouge"]["Readability"]["instance"]["n"] == 4
    assert client.get(url, {"difficulty": 9}).status_code == 400


def test_pairwise_spearman_and_the_leave_one_out_ceiling_by_brute_force():
    from itertools import combinations

    from analytics.report.build import _loo_ceiling, _mean_pairwise_spearman

    rng = np.random.default_rng(21)
    truth = rng.integers(1, 6, 60).astype(float)
    matrix = np.array([np.clip(truth + rng.integers(-1, 2, 60), 1, 5) for _ in range(6)])
    matrix[rng.random(matrix.shape) < 0.4] = np.nan  # each annotator misses ~40 %
    pairs = []
    for a, b in combinations(range(6), 2):
        both = ~np.isnan(matrix[a]) & ~np.isnan(matrix[b])
        pairs.append(stats.spearmanr(matrix[a][both], matrix[b][both]).statistic)
    got = _mean_pairwise_spearman(matrix)
    assert got["pairs"] == 15 and got["value"] == pytest.approx(np.mean(pairs))
    pearsons = []
    for r in range(6):
        others = np.delete(matrix, r, axis=0)
        keep = ~np.isnan(matrix[r]) & (np.sum(~np.isnan(others), axis=0) >= 1)
        rest = np.nanmean(others[:, keep], axis=0)
        pearsons.append(stats.pearsonr(matrix[r][keep], rest).statistic)
    loo = _loo_ceiling(matrix)
    assert loo["annotators"] == 6 and loo["pearson"] == pytest.approx(np.mean(pearsons))


def test_alpha_with_intervals_equals_the_library_on_crowd_data():
    rng = np.random.default_rng(5)
    rows = []
    for rid in range(120):
        truth = int(rng.integers(1, 6))
        for rater in rng.choice(
            [f"p{i}" for i in range(8)], size=int(rng.integers(1, 4)), replace=False
        ):
            rows.append(
                (
                    rid,
                    rid // 3,
                    "s",
                    "S",
                    str(rater),
                    int(np.clip(truth + rng.integers(-1, 2), 1, 5)),
                )
            )
    with_ci = build_report(rows, [], resamples=100)["agreement"]["S"]["krippendorff_alpha"]
    without = build_report(rows, [])["agreement"]["S"]["krippendorff_alpha"]
    for level in metrics.ALPHA_LEVELS:
        assert with_ci[level] == pytest.approx(without[level], abs=1e-12)


def test_one_way_icc_for_crowd_designs_uses_each_units_first_k_scores():
    from analytics.report.build import _icc

    rng = np.random.default_rng(8)
    truth = rng.integers(1, 6, 50).astype(float)
    matrix = np.full((10, 50), np.nan)
    for unit in range(50):
        k = 3 if unit % 5 else 4  # mostly three scores; every fifth unit has four
        for rater in rng.choice(10, size=k, replace=False):
            matrix[rater, unit] = np.clip(truth[unit] + rng.integers(-1, 2), 1, 5)
    got = _icc(matrix)
    assert got["design"].startswith("one-way") and got["k"] == 3 and got["n"] == 50
    slots = np.array([matrix[~np.isnan(matrix[:, u]), u][:3] for u in range(50)])
    want = metrics.icc(slots)
    assert got["ICC1"] == pytest.approx(want.ICC1) and got["ICC1k"] == pytest.approx(want.ICC1k)
    assert got["ICC2"] is None
