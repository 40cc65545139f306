"""Item-resampling bootstrap: the vectorised statistics equal the library values on the full
sample and scipy on an explicitly expanded resample; intervals behave as intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from analytics import bootstrap, metrics
from tests.analytics.test_metrics import KRIPPENDORFF_2011


@pytest.mark.parametrize("level", metrics.ALPHA_LEVELS)
def test_alpha_from_coincidence_matrices_equals_the_library(level):
    # each unit its own item here; Krippendorff (2011) published .743/.815/.849/.797
    result = bootstrap.alpha_intervals(KRIPPENDORFF_2011, list(range(12)), resamples=200)
    assert result[level].estimate == pytest.approx(
        metrics.krippendorff_alpha(KRIPPENDORFF_2011, level), abs=1e-12
    )
    assert result[level].low <= result[level].estimate <= result[level].high


def _scores(n_items: int, per_item: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 6, n_items * per_item).astype(float)
    y = np.clip(x + rng.integers(-1, 2, x.size), 1, 5)
    return x, y, np.repeat(np.arange(n_items), per_item)


def test_the_full_sample_estimates_equal_scipy():
    x, y, items = _scores(60, 3, seed=3)
    result = bootstrap.correlation_intervals(x, y, items, resamples=300)
    assert result["pearson"].estimate == pytest.approx(stats.pearsonr(x, y).statistic)
    assert result["spearman"].estimate == pytest.approx(stats.spearmanr(x, y).statistic)


def test_a_resample_table_gives_exactly_the_statistics_of_the_expanded_resample():
    # draw items by hand, expand the resample point by point, and compare with scipy
    x, y, items = _scores(40, 3, seed=5)
    rng = np.random.default_rng(11)
    drawn = rng.integers(0, 40, 40)
    expanded = np.concatenate([np.flatnonzero(items == i) for i in drawn])
    vx, cx = np.unique(x, return_inverse=True)
    vy, cy = np.unique(y, return_inverse=True)
    table = np.zeros((1, vx.size, vy.size))
    np.add.at(table[0], (cx[expanded], cy[expanded]), 1)
    pearson, spearman = bootstrap._stats_from_tables(table, vx, vy)
    assert pearson[0] == pytest.approx(stats.pearsonr(x[expanded], y[expanded]).statistic)
    assert spearman[0] == pytest.approx(stats.spearmanr(x[expanded], y[expanded]).statistic)


def test_intervals_are_reproducible_and_shrink_with_more_items():
    small = bootstrap.correlation_intervals(*_scores(30, 3, seed=1), resamples=400, seed=7)
    again = bootstrap.correlation_intervals(*_scores(30, 3, seed=1), resamples=400, seed=7)
    large = bootstrap.correlation_intervals(*_scores(600, 3, seed=1), resamples=400, seed=7)
    assert small["pearson"] == again["pearson"]
    width = lambda i: i.high - i.low  # noqa: E731
    assert width(large["pearson"]) < width(small["pearson"])
    assert small["pearson"].resamples == 400


def test_undefined_statistics_have_no_interval():
    constant = bootstrap.correlation_intervals([3, 3, 3, 3], [1, 2, 3, 4], [0, 0, 1, 1])
    assert constant["pearson"].estimate is None and constant["pearson"].low is None
    assert bootstrap.correlation_intervals([], [], [])["spearman"].resamples == 0
    assert bootstrap.alpha_intervals([[3, 3], [3, 3]], [0, 1])["interval"].estimate is None


def test_the_paired_test_prefers_the_judge_that_follows_the_people():
    x, close, items = _scores(200, 3, seed=9)
    rng = np.random.default_rng(10)
    far = rng.integers(1, 6, x.size).astype(float)
    better = bootstrap.paired_difference(x, close, far, items, resamples=300)
    assert better["estimate"] == pytest.approx(
        stats.pearsonr(x, close).statistic - stats.pearsonr(x, far).statistic
    )
    assert better["low"] > 0 and better["p_value_a_not_better"] < 0.01
    worse = bootstrap.paired_difference(x, far, close, items, resamples=300)
    assert worse["high"] < 0 and worse["p_value_a_not_better"] > 0.99
    assert not math.isnan(better["high"])


def test_alpha_without_a_unit_rated_twice_has_no_interval():
    """Two values, but every unit rated once (one rater per unit so far): nothing is
    pairable, so no alpha and no interval (this raised on an empty reshape)."""
    matrix = [[1, np.nan, np.nan], [np.nan, 2, np.nan], [np.nan, np.nan, 1]]
    found = bootstrap.alpha_intervals(matrix, [0, 1, 2], levels=("nominal",), resamples=50)
    assert found["nominal"].estimate is None and found["nominal"].resamples == 0
