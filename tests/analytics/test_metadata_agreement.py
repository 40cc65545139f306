"""The metadata agreement figures, against hand-worked values (no database)."""

from __future__ import annotations

import pytest
from scipy import stats

from analytics.metadata_agreement import (
    MetadataPair,
    jaccard,
    metadata_agreement,
    rank_correlations,
    shared_ranks,
    skill_overlap,
)


def pair(item, pd, ps, pl, vd, vs, vl):
    return MetadataPair(item, pd, ps, pl, vd, vs, vl)


def test_weighted_kappa_of_difficulty_matches_the_hand_worked_example():
    # proposed 1,2,3,3 against verified 1,3,3,2 (levels 1-5): observed quadratic
    # disagreement (0+1+0+1)/4 = 0.5; chance, from the margins (1/4, 1/4, 1/2) on both
    # sides, 0.5625 + 0.1875 + 0.625 = 1.375, so kappa_q = 1 - 0.5/1.375 = 7/11; linear:
    # 0.5 against 0.3125 + 0.1875 + 0.375 = 0.875, so kappa_l = 3/7.
    skills = ["a", "b", "c"]
    pairs = [
        pair(1, ["x"], skills, 1, ["x"], skills, 1),
        pair(2, ["x"], skills, 2, ["x"], skills, 3),
        pair(3, ["x"], skills, 3, ["x"], skills, 3),
        pair(4, ["x"], skills, 3, ["x"], skills, 2),
    ]
    figures = metadata_agreement(pairs)["overall"]
    assert figures["difficulty_kappa_quadratic"] == pytest.approx(7 / 11)
    assert figures["difficulty_kappa_linear"] == pytest.approx(3 / 7)
    assert figures["difficulty_exact"] == pytest.approx(0.5)
    assert figures["difficulty_n"] == 4


def test_skill_set_figures_and_rank_correlation():
    # item 1: same set, two skills swapped -> exact, overlap 1, Spearman 0.5, Kendall 1/3
    # item 2: one skill in common -> overlap 1/3, Jaccard 1/5, no rank figure
    pairs = [
        pair(1, ["x"], ["a", "b", "c"], 2, ["x"], ["b", "a", "c"], 2),
        pair(2, ["x"], ["a", "d", "e"], 2, ["y"], ["a", "b", "c"], 2),
    ]
    result = metadata_agreement(pairs)
    overall = result["overall"]
    assert overall["skills_exact"] == pytest.approx(0.5)
    assert overall["skills_overlap"] == pytest.approx((1 + 1 / 3) / 2)
    assert overall["skills_jaccard"] == pytest.approx((1 + 1 / 5) / 2)
    assert overall["rank_n"] == 1
    assert overall["rank_spearman"] == pytest.approx(0.5)
    assert overall["rank_kendall"] == pytest.approx(1 / 3)
    assert overall["domain_accuracy"] == pytest.approx(0.5)
    # per verified domain
    assert result["per_domain"]["x"]["skills_exact"] == 1.0
    assert result["per_domain"]["y"]["domain_accuracy"] == 0.0
    assert list(result["per_domain"]) == ["x", "y"]


def test_rank_correlation_agrees_with_scipy_on_the_shared_skills():
    proposed, verified = ["c", "a", "b"], ["a", "b", "c"]
    a, b = shared_ranks(proposed, verified)
    assert (a, b) == ([1, 2, 3], [3, 1, 2])
    figures = metadata_agreement([pair(1, ["x"], proposed, 1, ["x"], verified, 1)])["overall"]
    assert figures["rank_spearman"] == pytest.approx(stats.spearmanr(a, b).statistic)
    assert figures["rank_spearman"] == pytest.approx(-0.5)  # 1 - 6 * (4 + 1 + 1) / 24


def test_helpers_and_empty_input():
    assert skill_overlap(["a", "b", "c"], ["c", "d", "e"]) == pytest.approx(1 / 3)
    assert jaccard([], []) is None
    figures = metadata_agreement([])["overall"]
    assert figures["items"] == 0
    assert figures["skills_exact"] is None
    assert figures["difficulty_kappa_quadratic"] is None


def test_items_without_verified_values_are_left_out_of_each_figure():
    pairs = [
        pair(1, ["x"], ["a", "b", "c"], 3, [], [], None),
        pair(2, ["x"], ["a", "b", "c"], 3, ["x"], ["a", "b", "c"], 3),
    ]
    overall = metadata_agreement(pairs)["overall"]
    assert overall["items"] == 2
    assert overall["skills_n"] == overall["domains_n"] == overall["difficulty_n"] == 1
    assert overall["skills_exact"] == 1.0


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([1, 2, 3], [3, 1, 2]),
        ([1, 3], [2, 1]),
        ([2, 3], [1, 3]),
        ([1, 2, 3], [1, 2, 3]),
        ([3, 2, 1], [1, 2, 3]),
        ([1, 2], [1, 3]),
    ],
)
def test_the_closed_form_rank_correlations_equal_scipys(a, b):
    rho, tau = rank_correlations(a, b)
    assert rho == pytest.approx(stats.spearmanr(a, b).statistic)
    assert tau == pytest.approx(stats.kendalltau(a, b).statistic)
