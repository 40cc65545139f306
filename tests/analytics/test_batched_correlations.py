"""Many judges' correlations computed at once, equal to the bit to scipy row by row.

`metrics.correlate_many` (and `correlate`, which goes through it) computes Spearman and
Kendall's tau-b itself, from exact integer and half-integer sums, with the float steps
scipy takes; these tests hold every coefficient to `scipy.stats.spearmanr` /
`kendalltau` with ==, on scores with many ties, continuous values, subnormal and huge
magnitudes. The report built with the batched path is compared, as JSON, with the report
built one scipy call per judge.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from analytics import metrics

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def scipy_correlate(x: np.ndarray, y: np.ndarray) -> metrics.Correlation:
    """`metrics.correlate` as it was: one scipy call per coefficient."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[keep], b[keep]
    n = int(a.size)
    if n == 0:
        return metrics.Correlation(0, None, None, None, None, None, None)
    with np.errstate(over="ignore"):
        diff = np.abs(a - b)
    mae = metrics.mean_abs_difference(a, b)
    exact, within = float(np.mean(diff < 0.5)), float(np.mean(diff <= 1))
    if n < 2 or a.min() == a.max() or b.min() == b.max():
        return metrics.Correlation(n, None, None, None, mae, exact, within)
    return metrics.Correlation(
        n=n,
        pearson=float(metrics.row_pearson(a[None, :], b[None, :])[0]),
        spearman=float(stats.spearmanr(a, b).statistic),
        kendall=float(stats.kendalltau(a, b, variant="b").statistic),
        mae=mae,
        exact=exact,
        within_one=within,
    )


def scores(rng: np.random.Generator, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    if kind == "likert":
        return rng.integers(1, 6, shape).astype(float)
    if kind == "means of three":
        return rng.integers(3, 16, shape) / 3
    if kind == "two values":
        return rng.integers(0, 2, shape).astype(float)
    if kind == "raw":
        return np.round(rng.normal(size=shape), 4)
    if kind == "subnormal":
        return rng.integers(1, 40, shape) * 1e-322
    if kind == "huge":
        return rng.normal(size=shape) * 1e300
    return rng.normal(size=shape)


KINDS = ["likert", "means of three", "two values", "raw", "subnormal", "huge", "normal"]


@pytest.mark.parametrize("x_kind", KINDS)
@pytest.mark.parametrize("y_kind", KINDS)
def test_many_rows_equal_scipy_row_by_row(x_kind: str, y_kind: str) -> None:
    rng = np.random.default_rng(len(x_kind) * 31 + len(y_kind))
    for n in (2, 3, 5, 10, 37, 400):
        x = scores(rng, x_kind, (n,))
        ys = scores(rng, y_kind, (6, n))
        ys[0] = ys[0, 0]  # a constant row: undefined
        ys[1] = x  # a perfect match
        ys[2] = -x
        found = metrics.correlate_many(x, ys)
        for row, got in zip(ys, found, strict=True):
            assert got == scipy_correlate(x, row)
            assert metrics.correlate(x, row) == got


def test_missing_pairs_are_left_out_as_before() -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(1, 6, 50).astype(float)
    ys = rng.integers(1, 6, (3, 50)).astype(float)
    ys[0, :5] = np.nan
    x[10] = np.nan
    for row, got in zip(ys, metrics.correlate_many(x, ys), strict=True):
        assert got == scipy_correlate(x, row)
    assert (
        metrics.correlate_many(np.array([]), np.empty((2, 0)))
        == [metrics.Correlation(0, None, None, None, None, None, None)] * 2
    )


def test_tables_larger_than_a_chunk_equal_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    # rows counted in several chunks, and a row whose table alone is too large (scipy)
    rng = np.random.default_rng(3)
    x = rng.integers(1, 6, 300).astype(float)
    ys = np.round(rng.normal(size=(5, 300)), 3)
    monkeypatch.setattr(metrics, "_TABLE_CELLS", 5 * 300 * 2)
    for row, got in zip(ys, metrics.correlate_many(x, ys), strict=True):
        assert got == scipy_correlate(x, row)
    monkeypatch.setattr(metrics, "_TABLE_CELLS", 10)
    for row, got in zip(ys, metrics.correlate_many(x, ys), strict=True):
        assert got == scipy_correlate(x, row)
