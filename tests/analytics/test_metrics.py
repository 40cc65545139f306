"""Agreement and correlation coefficients against the worked examples of the papers and
references that define them, plus the edge cases a report meets (missing ratings, units
with one rating, constant data)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from analytics import metrics

NAN = math.nan

# Krippendorff, K. (2011). Computing Krippendorff's Alpha-Reliability. Section C: four
# observers, twelve units, values 1-5, missing values. Published: nominal .743, ordinal
# .815, interval .849, ratio .797.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]


@pytest.mark.parametrize(
    ("level", "published"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_krippendorff_alpha_matches_krippendorff_2011(level, published):
    assert metrics.krippendorff_alpha(KRIPPENDORFF_2011, level) == pytest.approx(
        published, abs=5e-4
    )


def test_krippendorff_alpha_is_undefined_without_pairable_variation():
    assert metrics.krippendorff_alpha([[1, NAN], [NAN, 2]], "nominal") is None  # no pairs
    assert metrics.krippendorff_alpha([[3, 3], [3, 3]], "interval") is None  # no variation
    with pytest.raises(ValueError, match="level"):
        metrics.krippendorff_alpha(KRIPPENDORFF_2011, "cardinal")


# Fleiss' kappa worked example (ten subjects, fourteen raters, five categories) as given in
# the Wikipedia article "Fleiss' kappa", after Fleiss (1971): P-bar = 0.378, P-bar_e = 0.213,
# kappa = 0.210.
FLEISS_EXAMPLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def test_fleiss_kappa_matches_the_published_example():
    assert metrics.fleiss_kappa(FLEISS_EXAMPLE) == pytest.approx(0.210, abs=5e-4)


def test_fleiss_kappa_and_gwet_ac1_for_units_with_different_numbers_of_raters():
    # Gwet, K. L. (2014). Handbook of Inter-Rater Reliability, 4th ed., pp. 55-56 (with its
    # errata): the four raters and twelve units of Krippendorff (2011), units rated by one
    # to four raters, five categories. Published: percent agreement 0.8182; Fleiss' kappa
    # 0.7612 (P_e 0.2387); Gwet's AC1 0.7754 (P_e 0.1903).
    counts, _ = metrics.category_counts(KRIPPENDORFF_2011, categories=[1, 2, 3, 4, 5])
    assert metrics.fleiss_kappa(counts) == pytest.approx(0.7612, abs=5e-5)
    assert metrics.gwet_ac1(counts) == pytest.approx(0.7754, abs=5e-5)
    assert metrics.fleiss_kappa([[1, 0]]) is None
    assert metrics.fleiss_kappa([[2, 0], [3, 0]]) is None  # one category only: undefined
    assert metrics.gwet_ac1([[2, 0], [0, 2]], n_categories=1) is None


def test_gwet_ac1_counts_categories_nobody_used():
    # the same table read on a 1-5 scale and on the three values used: q changes P_e
    counts = [[2, 0, 0], [0, 2, 0], [0, 1, 1]]
    three = metrics.gwet_ac1(counts)
    five = metrics.gwet_ac1([[*row, 0, 0] for row in counts], n_categories=5)
    # hand arithmetic: P_a = 2/3; pi = (1/3, 1/2, 1/6); sum pi(1-pi) = 2/9 + 1/4 + 5/36
    # = 11/18; P_e(q=3) = 11/36, P_e(q=5) = 11/72
    assert three == pytest.approx((2 / 3 - 11 / 36) / (1 - 11 / 36))
    assert five == pytest.approx((2 / 3 - 11 / 72) / (1 - 11 / 72))


def test_fleiss_kappa_from_a_reliability_matrix():
    counts, cats = metrics.category_counts([[1, 2, 2, NAN], [1, 2, 1, 3], [1, NAN, 2, 3]])
    assert list(cats) == [1, 2, 3]
    assert counts.tolist() == [[3, 0, 0], [0, 2, 0], [1, 2, 0], [0, 0, 2]]


# Cohen's kappa, the worked example of the Wikipedia article "Cohen's kappa": 50
# applications, both readers yes 20, only A yes 5, only B yes 10, both no 15:
# p_o = 0.7, p_e = 0.5, kappa = 0.4.
def test_cohen_kappa_matches_the_published_example():
    a = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert metrics.cohen_kappa(a, b) == pytest.approx(0.4)
    # units only one rater rated are left out
    assert metrics.cohen_kappa([*a, 1], [*b, NAN]) == pytest.approx(0.4)
    assert metrics.cohen_kappa([2, 2], [2, 2]) is None


def test_cohen_kappa_matches_artstein_and_poesio_2008():
    # Artstein, R., & Poesio, M. (2008). Inter-coder agreement for computational
    # linguistics. Computational Linguistics 34(4). Table 4: two coders, three categories,
    # 100 items; kappa = 0.8013.
    a = [0] * 46 + [1] * 44 + [2] * 10
    b = [0] * 52 + [1] * 32 + [2] * 16
    assert metrics.cohen_kappa(a, b) == pytest.approx(0.8013, abs=5e-5)


def test_weighted_cohen_kappa():
    # With two categories every weighting is the same (one disagreement cell each way).
    a = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    for weights in metrics.KAPPA_WEIGHTS:
        assert metrics.cohen_kappa(a, b, weights) == pytest.approx(0.4)
    # Quadratic weights: kappa_w = 2 cov(x, y) / (var x + var y + (mean x - mean y)^2) with
    # population moments, for equally spaced categories (Fleiss & Cohen 1973; Schuster 2004).
    rng = np.random.default_rng(4)
    x = rng.integers(1, 6, 80).astype(float)
    y = np.clip(x + rng.integers(-2, 3, 80), 1, 5)
    cats = [1, 2, 3, 4, 5]
    identity = 2 * np.cov(x, y, bias=True)[0, 1] / (x.var() + y.var() + (x.mean() - y.mean()) ** 2)
    assert metrics.cohen_kappa(x, y, "quadratic", categories=cats) == pytest.approx(identity)
    # a three-category example also used by a widely used library's own tests (unweighted
    # 0.9315, linear 0.9412, quadratic 0.9541)
    a = [0] * 46 + [1] * 44 + [2] * 10
    b = [0] * 50 + [1] * 40 + [2] * 10
    assert metrics.cohen_kappa(a, b) == pytest.approx(0.9315, abs=5e-5)
    assert metrics.cohen_kappa(a, b, "linear") == pytest.approx(0.9412, abs=5e-5)
    assert metrics.cohen_kappa(a, b, "quadratic") == pytest.approx(0.9541, abs=5e-5)
    with pytest.raises(ValueError, match="weights"):
        metrics.cohen_kappa(a, b, "cubic")


# Shrout, P. E., & Fleiss, J. L. (1979). Intraclass correlations: uses in assessing rater
# reliability. Psychological Bulletin 86(2), 420-428. Table 2 (six targets, four judges)
# and Table 4: ICC(1,1) .17, ICC(2,1) .29, ICC(3,1) .71, ICC(1,4) .44, ICC(2,4) .62,
# ICC(3,4) .91.
SHROUT_FLEISS = [
    [9, 2, 5, 8],
    [6, 1, 3, 2],
    [8, 4, 6, 8],
    [7, 1, 2, 6],
    [10, 5, 6, 9],
    [6, 2, 4, 7],
]


@pytest.mark.parametrize(
    ("form", "published"),
    [
        ("ICC1", 0.17),
        ("ICC2", 0.29),
        ("ICC3", 0.71),
        ("ICC1k", 0.44),
        ("ICC2k", 0.62),
        ("ICC3k", 0.91),
    ],
)
def test_icc_matches_shrout_and_fleiss_1979(form, published):
    result = metrics.icc(SHROUT_FLEISS)
    assert (result.n, result.k) == (6, 4)
    assert getattr(result, form) == pytest.approx(published, abs=0.005)


def test_icc_needs_complete_varying_data():
    with pytest.raises(ValueError, match="complete"):
        metrics.icc([[1, NAN], [2, 3]])
    assert metrics.icc([[1, 2]]) is None
    assert metrics.icc([[3, 3], [3, 3]]) is None


def test_correlations_come_from_scipy_and_agreement_is_counted_on_pairs():
    x = [1, 2, 3, 4, 5, NAN, 2]
    y = [2, 2, 3, 5, 4, 3, NAN]
    result = metrics.correlate(x, y)
    a, b = [1, 2, 3, 4, 5], [2, 2, 3, 5, 4]
    assert result.n == 5
    assert result.pearson == pytest.approx(stats.pearsonr(a, b).statistic)
    assert result.spearman == pytest.approx(stats.spearmanr(a, b).statistic)
    assert result.kendall == pytest.approx(stats.kendalltau(a, b, variant="b").statistic)
    assert result.mae == pytest.approx(0.6)
    assert (result.exact, result.within_one) == (0.4, 1.0)
    constant = metrics.correlate([3, 3, 3], [1, 2, 3])
    assert constant.pearson is None and constant.mae == pytest.approx(1.0)
    assert metrics.correlate([], []).n == 0


def test_kendall_is_tau_b_with_ties():
    # tau-b corrects for ties; tau-a would not: the two differ on this tied data
    x, y = np.array([1, 1, 2, 3]), np.array([1, 2, 2, 3])
    result = metrics.correlate(x, y)
    concordant, discordant = 4, 0  # pairs (i<j) strictly ordered the same way / opposite
    ties_x, ties_y, n0 = 1, 1, 6
    tau_b = (concordant - discordant) / math.sqrt((n0 - ties_x) * (n0 - ties_y))
    assert result.kendall == pytest.approx(tau_b)


def test_grouped_correlations_equal_scipy_per_group():
    rng = np.random.default_rng(12)
    groups = np.concatenate(
        [np.repeat(np.arange(30), 4), np.repeat(np.arange(30, 40), 3), [40, 41, 41]]
    )
    x = rng.integers(1, 6, groups.size).astype(float)
    y = np.clip(x + rng.integers(-1, 2, groups.size), 1, 5)
    got = metrics.grouped_correlations(x, y, groups)
    for k in np.unique(groups):
        gx, gy = x[groups == k], y[groups == k]
        defined = gx.size > 1 and np.ptp(gx) > 0 and np.ptp(gy) > 0
        scipy_of = {
            "pearson": stats.pearsonr,
            "spearman": stats.spearmanr,
            "kendall": lambda a, b: stats.kendalltau(a, b, variant="b"),
        }
        for name, fn in scipy_of.items():
            if defined:
                assert got[name][k] == pytest.approx(fn(gx, gy).statistic), (name, k)
            else:
                assert np.isnan(got[name][k]), (name, k)
