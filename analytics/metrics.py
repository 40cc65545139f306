"""Agreement and correlation coefficients, pure (numpy/scipy, no Django).

Where a well-kept library computes a coefficient exactly it is used: Krippendorff's alpha
(`krippendorff`), Spearman and Kendall's tau-b (`scipy.stats`). Pearson is computed here
(`row_pearson`, `table_pearson`) because scipy's loses digits on subnormal scores and
overflows near 1e308: values are brought to the unit scale by a power of two (exact) and
centred before any product; tests/analytics/test_numeric_robustness.py holds it to scipy
and to exact arithmetic. The rest is written here and each is checked in
tests/analytics/test_metrics.py against the worked example of the paper or textbook that
defines it:

- Fleiss' kappa (Fleiss 1971), generalised to units with different numbers of raters, and
  Gwet's AC1 (Gwet 2008, 2014);
- Cohen's kappa, unweighted (Cohen 1960) and weighted (Cohen 1968);
- the six intraclass correlations of Shrout & Fleiss (1979).

Conventions: a *reliability matrix* has one row per rater and one column per unit, with
NaN where a rater did not rate a unit (Krippendorff's layout). Category codes are numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, cast

import krippendorff
import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]
ALPHA_LEVELS: tuple[AlphaLevel, ...] = ("nominal", "ordinal", "interval", "ratio")


def _matrix(reliability: ArrayLike) -> npt.NDArray[np.float64]:
    data = np.asarray(reliability, dtype=np.float64)
    if data.ndim != 2:
        raise ValueError("a reliability matrix has one row per rater and one column per unit")
    return data


def _pairable(data: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Columns (units) with at least two ratings: the only ones agreement can use."""
    return data[:, np.sum(~np.isnan(data), axis=0) >= 2]


def krippendorff_alpha(reliability: ArrayLike, level: str) -> float | None:
    """Krippendorff's alpha at one level of measurement; None when undefined (fewer than
    two pairable values, or no variation at all)."""
    if level not in ALPHA_LEVELS:
        raise ValueError(f"level must be one of {', '.join(ALPHA_LEVELS)}")
    data = _pairable(_matrix(reliability))
    values = data[~np.isnan(data)]
    if values.size < 2 or np.unique(values).size < 2:
        return None
    domain = np.unique(values)
    return float(
        krippendorff.alpha(
            reliability_data=data,
            level_of_measurement=cast(AlphaLevel, level),
            value_domain=domain,
        )
    )


def category_counts(
    reliability: ArrayLike, categories: ArrayLike | None = None
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """(units x categories) counts of the ratings each unit got, and the categories."""
    data = _matrix(reliability)
    values = data[~np.isnan(data)]
    cats = np.unique(values) if categories is None else np.asarray(categories, dtype=np.float64)
    counts = np.stack([np.sum(data == c, axis=0) for c in cats], axis=1)
    return counts, cats


def _unit_agreement(
    table: npt.NDArray[np.float64],
) -> tuple[float, npt.NDArray[np.float64]] | None:
    """(P_a, pi) as Gwet (2014, ch. 2) defines them for any number of raters per unit:
    P_a is the mean over units with two or more ratings of
    sum_k r_ik (r_ik - 1) / (r_i (r_i - 1)); pi_k is the mean over units with one or more
    ratings of r_ik / r_i. None without a unit of two ratings."""
    r = table.sum(axis=1)
    pairable = r >= 2
    if not pairable.any():
        return None
    t = table[pairable]
    p_a = float(((t * (t - 1)).sum(axis=1) / (r[pairable] * (r[pairable] - 1))).mean())
    rated = r >= 1
    pi = (table[rated] / r[rated, None]).mean(axis=0)
    return p_a, pi


def fleiss_kappa(counts: ArrayLike) -> float | None:
    """Fleiss' kappa from a (units x categories) table of rating counts, generalised to
    units with different numbers of raters as in Gwet (2014): P_e = sum_k pi_k^2 with the
    pi_k of `_unit_agreement`. With the same number of raters on every unit this is Fleiss
    (1971). None when undefined (no unit with two ratings, or P_e = 1)."""
    table = np.asarray(counts, dtype=np.float64)
    found = _unit_agreement(table) if table.size else None
    if found is None:
        return None
    p_a, pi = found
    p_e = float((pi**2).sum())
    if np.isclose(p_e, 1.0):
        return None
    return (p_a - p_e) / (1 - p_e)


def gwet_ac1(counts: ArrayLike, n_categories: int | None = None) -> float | None:
    """Gwet's AC1 (Gwet 2008; 2014 for missing ratings) from a (units x categories) table:
    P_e = sum_k pi_k (1 - pi_k) / (q - 1), q the number of categories raters could use
    (`n_categories`; default: the table's columns). None when undefined."""
    table = np.asarray(counts, dtype=np.float64)
    found = _unit_agreement(table) if table.size else None
    q = n_categories or table.shape[1]
    if found is None or q < 2:
        return None
    p_a, pi = found
    p_e = float((pi * (1 - pi)).sum() / (q - 1))
    if np.isclose(p_e, 1.0):
        return None
    return (p_a - p_e) / (1 - p_e)


KAPPA_WEIGHTS = ("unweighted", "linear", "quadratic")


def cohen_kappa(
    first: ArrayLike,
    second: ArrayLike,
    weights: str = "unweighted",
    categories: ArrayLike | None = None,
) -> float | None:
    """Cohen's kappa of two raters over the units both rated (NaN = not rated): unweighted
    (Cohen 1960) or weighted (Cohen 1968) with linear |i - j| or quadratic (i - j)^2
    disagreement weights over the ordered categories (`categories`, default: the values
    used), kappa_w = 1 - sum w_ij o_ij / sum w_ij e_ij."""
    if weights not in KAPPA_WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(KAPPA_WEIGHTS)}")
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[both], b[both]
    if a.size == 0:
        return None
    cats = np.unique(np.concatenate([a, b])) if categories is None else np.sort(categories)
    index = {c: i for i, c in enumerate(cats)}
    observed = np.zeros((cats.size, cats.size))
    np.add.at(observed, ([index[v] for v in a], [index[v] for v in b]), 1)
    observed /= a.size
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    i, j = np.meshgrid(np.arange(cats.size), np.arange(cats.size), indexing="ij")
    disagreement = {
        "unweighted": (i != j).astype(float),
        "linear": np.abs(i - j).astype(float),
        "quadratic": ((i - j) ** 2).astype(float),
    }[weights]
    chance = float((disagreement * expected).sum())
    if np.isclose(chance, 0.0):
        return None
    return 1 - float((disagreement * observed).sum()) / chance


@dataclass(frozen=True)
class ICC:
    """The six intraclass correlations of Shrout & Fleiss (1979), for n targets rated by the
    same k judges. Case 1: each target rated by different judges (one-way random); case 2:
    judges a random sample (two-way random); case 3: these judges only (two-way mixed).
    The "k" forms are the reliability of the mean of the k judges."""

    ICC1: float
    ICC1k: float
    ICC2: float
    ICC2k: float
    ICC3: float
    ICC3k: float
    n: int
    k: int


def icc(ratings: ArrayLike) -> ICC | None:
    """From a complete (targets x judges) matrix (no missing values); None with fewer than
    two targets or judges, or when the targets do not vary at all."""
    x = np.asarray(ratings, dtype=np.float64)
    if x.ndim != 2 or np.isnan(x).any():
        raise ValueError("ICC needs a complete targets x judges matrix")
    n, k = x.shape
    if n < 2 or k < 2:
        return None
    x = icc_scaled(x)
    grand = x.mean()
    ss_total = np.float64(((x - grand) ** 2).sum())  # numpy floats: x/0 is inf, not a raise
    ss_targets = np.float64(k * ((x.mean(axis=1) - grand) ** 2).sum())
    ss_judges = np.float64(n * ((x.mean(axis=0) - grand) ** 2).sum())
    ss_error = ss_total - ss_targets - ss_judges
    bms = ss_targets / (n - 1)
    wms = (ss_total - ss_targets) / (n * (k - 1))
    jms = ss_judges / (k - 1)
    ems = ss_error / ((n - 1) * (k - 1))
    if np.isclose(bms, 0.0):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        return ICC(
            ICC1=float((bms - wms) / (bms + (k - 1) * wms)),
            ICC1k=float((bms - wms) / bms),
            ICC2=float((bms - ems) / (bms + (k - 1) * ems + k * (jms - ems) / n)),
            ICC2k=float((bms - ems) / (bms + (jms - ems) / n)),
            ICC3=float((bms - ems) / (bms + (k - 1) * ems)),
            ICC3k=float((bms - ems) / bms),
            n=n,
            k=k,
        )


def icc_scaled(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Scores far from 1 (beyond 2**±500) times the power of two that brings the largest
    to [0.5, 1): the ICCs are ratios of mean squares, which would overflow or underflow
    there; scores on any ordinary scale are left as they are."""
    top = float(np.abs(x).max(initial=0.0))
    if top == 0 or 2.0**-500 < top < 2.0**500:
        return x
    return np.ldexp(x, -math.frexp(top)[1])


@dataclass(frozen=True)
class Correlation:
    n: int
    pearson: float | None
    spearman: float | None
    kendall: float | None  # tau-b
    mae: float | None
    exact: float | None  # share of |x - y| < 0.5 (equal after rounding to the scale)
    within_one: float | None  # share of |x - y| <= 1


def correlate(x: ArrayLike, y: ArrayLike) -> Correlation:
    """Pearson (`row_pearson`, equal to scipy's wherever scipy is accurate), Spearman and
    Kendall's tau-b (scipy's `spearmanr` and `kendalltau`, bit for bit: see
    `correlate_many`) and the agreement figures of paired scores (pairs with a missing
    side are left out). A coefficient is None when undefined (fewer than two pairs, or a
    constant side: all values equal, compared exactly)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = ~np.isnan(a) & ~np.isnan(b)
    return correlate_many(a[keep], b[keep][None, :])[0]


def correlate_many(x: ArrayLike, ys: ArrayLike) -> list[Correlation]:
    """`correlate` of `x` with each row of `ys` (many judges on the same responses), at
    once: the figures are those of `correlate` row by row, to the bit. Spearman is scipy's
    (the Pearson of midranks through `np.corrcoef`): midranks are multiples of 1/2, so
    their deviations from the mean rank, products and sums are exact in any order, and the
    coefficient is then rounded as `np.corrcoef` rounds it. Kendall's tau-b is scipy's
    formula on the same exact integers (concordant less discordant pairs, ties), counted
    here from each row's table of (x value, y value) pairs. Pairs with a missing side
    (NaN) go through `correlate` one row at a time."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(ys, dtype=np.float64)
    b = b.reshape(1, -1) if b.ndim == 1 else b
    if np.isnan(a).any() or np.isnan(b).any():
        return [correlate(a, row) for row in b]
    n = int(a.size)
    if n == 0:
        return [Correlation(0, None, None, None, None, None, None) for _ in range(len(b))]
    with np.errstate(over="ignore"):  # |a - b| past the largest float is inf: not < 0.5
        diff = np.abs(a - b)
        mae = diff.mean(axis=1)
    for row in np.flatnonzero(~np.isfinite(mae)):
        mae[row] = mean_abs_difference(a, b[row])
    exact, within = (diff < 0.5).mean(axis=1), (diff <= 1).mean(axis=1)
    defined = np.zeros(len(b), dtype=bool)
    if n >= 2 and not _constant(a):
        defined = b.max(axis=1) != b.min(axis=1)
    pearson = np.full(len(b), np.nan)
    spearman, kendall = pearson.copy(), pearson.copy()
    if defined.any():
        rows = np.flatnonzero(defined)
        ordinary = _ordinary_rows(b[rows])
        for part in (rows[ordinary], rows[~ordinary]):  # as `row_pearson` row by row
            if part.size:
                pearson[part] = row_pearson(np.broadcast_to(a, (part.size, n)), b[part])
        spearman[rows] = _spearman_rows(a, b[rows])
        kendall[rows] = _tau_b_rows(a, b[rows])
    return [
        Correlation(
            n=n,
            pearson=float(pearson[k]) if defined[k] else None,
            spearman=float(spearman[k]) if defined[k] else None,
            kendall=float(kendall[k]) if defined[k] else None,
            mae=float(mae[k]),
            exact=float(exact[k]),
            within_one=float(within[k]),
        )
        for k in range(len(b))
    ]


def _ordinary_rows(values: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """`_ordinary` of each row."""
    magnitude = np.abs(values)
    low = np.min(magnitude, axis=1, where=magnitude > 0, initial=np.inf)
    return np.asarray((magnitude.max(axis=1) < 2.0**400) & (low > 2.0**-400))


#: Above this many pairs a sum of products of midrank deviations (each at most n**2 / 4)
#: may pass 2**53, where float sums stop being exact: scipy is called row by row there.
_EXACT_RANK_SUMS = 100_000


def _spearman_rows(
    a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """scipy's Spearman of `a` with each row of `b` (no constant side)."""
    n = a.size
    if n > _EXACT_RANK_SUMS:
        # scipy is imported where used: at module top it added ~0.5 s of CPU to every process start
        from scipy import stats

        return np.array([stats.spearmanr(a, row).statistic for row in b], dtype=np.float64)
    ra = midranks(a)
    rb = midranks(b)
    da = ra - ra.mean()
    db = rb - rb.mean(axis=1, keepdims=True)
    # np.corrcoef: the covariances times 1 / (n - 1), then divided by each side's root
    scale = np.true_divide(1, n - 1)
    sxy = (db * da).sum(axis=1) * scale
    sxx = (da * da).sum() * scale
    syy = (db * db).sum(axis=1) * scale
    r = sxy / np.sqrt(syy) / np.sqrt(sxx)
    return np.asarray(np.clip(r, -1.0, 1.0), dtype=np.float64)


#: Cells of (x value, y value) tables counted at once by `_tau_b_rows`.
_TABLE_CELLS = 2**22


def _tau_b_rows(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """scipy's Kendall tau-b of `a` with each row of `b` (no constant side): the same
    integers (S = concordant - discordant pairs, pairs tied in x, in y, all pairs) and the
    same float steps, S / sqrt(all - x ties) / sqrt(all - y ties). S comes from each row's
    table T of dense ranks (x value, y value): every cell times the pairs below-left of it
    less those above-left, read from two-dimensional running sums of T."""
    n = a.size
    _, xr = np.unique(a, return_inverse=True)
    kx = int(xr.max()) + 1
    order = np.argsort(b, axis=1, kind="stable")
    ordered = np.take_along_axis(b, order, axis=1)
    dense_sorted = (
        np.cumsum(
            np.concatenate(
                [np.ones((len(b), 1), dtype=np.int64), ordered[:, 1:] != ordered[:, :-1]], axis=1
            ),
            axis=1,
        )
        - 1
    )
    yr = np.empty_like(dense_sorted)
    np.put_along_axis(yr, order, dense_sorted, axis=1)
    ky = int(dense_sorted[:, -1].max()) + 1
    x_counts = np.bincount(xr, minlength=kx)
    x_ties = int((x_counts * (x_counts - 1) // 2).sum())
    total = n * (n - 1) // 2
    s = np.zeros(len(b), dtype=np.int64)
    y_ties = np.zeros(len(b), dtype=np.int64)
    if kx * ky > _TABLE_CELLS:
        from scipy import stats

        return np.array([stats.kendalltau(a, row, variant="b").statistic for row in b])
    step = max(1, _TABLE_CELLS // (kx * ky))
    for start in range(0, len(b), step):
        part = yr[start : start + step]
        rows = len(part)
        cell = (np.arange(rows)[:, None] * kx + xr) * ky + part
        table = np.bincount(cell.ravel(), minlength=rows * kx * ky).reshape(rows, kx, ky)
        running = np.zeros((rows, kx + 1, ky + 1), dtype=np.int64)
        running[:, 1:, 1:] = table.cumsum(axis=1).cumsum(axis=2)
        below = running[:, :-1, :-1]  # x smaller, y smaller
        above = running[:, :-1, -1:] - running[:, :-1, 1:]  # x smaller, y larger
        s[start : start + rows] = (table * (below - above)).sum(axis=(1, 2))
        y_counts = table.sum(axis=1)
        y_ties[start : start + rows] = (y_counts * (y_counts - 1) // 2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (
            s.astype(np.float64)
            / np.sqrt(float(total - x_ties))
            / np.sqrt((total - y_ties).astype(np.float64))
        )
    return np.asarray(np.minimum(1.0, np.maximum(-1.0, out)), dtype=np.float64)


def _constant(values: npt.NDArray[np.float64]) -> bool:
    return bool(values.min() == values.max())


def mean_abs_difference(x: ArrayLike, y: ArrayLike) -> float:
    """The mean of |x - y|, finite whenever it is below the largest float: the differences
    are taken as they are unless one of them or their sum would overflow, and then at a
    power-of-two scale (exact) that keeps them and their sum finite."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    with np.errstate(over="ignore"):
        mean = float(np.abs(a - b).mean())
    if math.isfinite(mean):
        return mean
    half = np.abs(a * 0.5 - b * 0.5)  # each at most the largest float
    shift = int(np.frexp(half.max())[1]) + int(half.size).bit_length()
    with np.errstate(over="ignore"):
        return float(np.ldexp(np.ldexp(half, -shift).mean(), shift + 1))


def grouped_correlations(
    x: ArrayLike, y: ArrayLike, groups: ArrayLike
) -> dict[str, npt.NDArray[np.float64]]:
    """Pearson, Spearman and Kendall's tau-b within each group (e.g. the systems' responses
    to one item), vectorised over groups of equal size; NaN where undefined (fewer than two
    pairs or a constant side). Returns arrays aligned with `np.unique(groups)`. Equal to
    scipy's per-group results (tests/analytics/test_metrics.py)."""
    found = grouped_correlations_many(x, np.asarray(y, dtype=np.float64)[None, :], groups)
    return {name: values[0] for name, values in found.items()}


#: Values `grouped_correlations_many` handles at once (judges x groups x pairs of a group).
_GROUP_CELLS = 2**21


def grouped_correlations_many(
    x: ArrayLike, ys: ArrayLike, groups: ArrayLike
) -> dict[str, npt.NDArray[np.float64]]:
    """`grouped_correlations` of `x` with each row of `ys` (judges x responses): arrays of
    judges x groups, each row equal to the bit to that judge's own `grouped_correlations`
    (Pearson is taken apart for judges whose values `row_pearson` would scale, as it
    decides that over one judge's values)."""
    x, ys = np.asarray(x, dtype=np.float64), np.asarray(ys, dtype=np.float64)
    keys, group = np.unique(np.asarray(groups), return_inverse=True)
    judges = ys.shape[0]
    out = {
        name: np.full((judges, keys.size), np.nan) for name in ("pearson", "spearman", "kendall")
    }
    order = np.argsort(group, kind="stable")
    sizes = np.bincount(group, minlength=keys.size)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for size in np.unique(sizes):
        if size < 2:
            continue
        which = np.flatnonzero(sizes == size)
        idx = order[starts[which][:, None] + np.arange(size)]
        gx = x[idx]
        rx = midranks(gx)
        step = max(1, _GROUP_CELLS // (which.size * max(int(size) * (int(size) - 1) // 2, 1)))
        for first in range(0, judges, step):
            gy = ys[first : first + step][:, idx]  # judges x groups x size
            part = slice(first, first + len(gy))
            wide = (len(gy) * which.size, int(size))
            ordinary = np.array([_ordinary(block) for block in gy])
            pearson = np.full((len(gy), which.size), np.nan)
            for kind in (ordinary, ~ordinary):
                if kind.any():
                    rows = gy[kind]
                    pearson[kind] = row_pearson(
                        np.broadcast_to(gx, rows.shape).reshape(-1, int(size)),
                        rows.reshape(-1, int(size)),
                    ).reshape(len(rows), which.size)
            out["pearson"][part, which] = pearson
            ry = midranks(gy)
            out["spearman"][part, which] = row_pearson(
                np.broadcast_to(rx, gy.shape).reshape(wide), ry.reshape(wide)
            ).reshape(len(gy), which.size)
            out["kendall"][part, which] = row_tau_b(
                np.broadcast_to(gx, gy.shape).reshape(wide), gy.reshape(wide)
            ).reshape(len(gy), which.size)
    return out


def midranks(values: ArrayLike) -> npt.NDArray[np.float64]:
    """`scipy.stats.rankdata(values, axis=-1)` (average ranks of ties), the same numbers:
    a midrank is (first + last position of its tie) / 2, exact in any way it is computed.
    Without scipy's per-call checks, for the many small rows of the resamples; rows with
    NaN go to scipy (which makes them all NaN)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0 or np.isnan(x).any():
        from scipy import stats

        return np.asarray(stats.rankdata(x, axis=-1), dtype=np.float64)
    order = np.argsort(x, axis=-1, kind="stable")
    ordered = np.take_along_axis(x, order, axis=-1)
    position = np.broadcast_to(np.arange(1, x.shape[-1] + 1, dtype=np.float64), x.shape)
    new = np.ones(x.shape, dtype=bool)
    new[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    last = np.ones(x.shape, dtype=bool)
    last[..., :-1] = new[..., 1:]
    first = np.maximum.accumulate(np.where(new, position, 0.0), axis=-1)
    end = np.flip(
        np.minimum.accumulate(np.flip(np.where(last, position, np.inf), axis=-1), axis=-1),
        axis=-1,
    )
    ranks = np.empty_like(x)
    np.put_along_axis(ranks, order, (first + end) / 2, axis=-1)
    return ranks


def _unit_scale(
    values: npt.NDArray[np.float64], present: npt.NDArray[np.bool_] | None = None
) -> npt.NDArray[np.float64]:
    """Each row times the power of two that brings its largest |value| (of the `present`
    ones) into [0.5, 1). A power of two moves only the exponent, so this is exact: it
    scales subnormals (1e-320 has a few significant bits, and a mean of such values rounds
    to them) and values near the largest float (whose sums overflow) onto the unit scale,
    where products neither underflow nor overflow. Only values more than 2**1074 times
    smaller than the row's largest flush to zero, where they cannot move a correlation.
    Values not `present` become 0."""
    magnitude = np.abs(values) if present is None else np.where(present, np.abs(values), 0.0)
    exponent = np.frexp(magnitude.max(axis=-1, keepdims=True))[1]
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = np.ldexp(values, -exponent)
    return scaled if present is None else np.where(present, scaled, 0.0)


def _centred(
    values: npt.NDArray[np.float64],
    weights: npt.NDArray[np.float64] | None = None,
    inverse_total: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.float64]:
    """Each row less its (weighted) mean, with the corrected two-pass step (Chan, Golub &
    LeVeque 1983): the mean of the deviations is taken off again, so that nearly constant
    rows, whose deviations are a few units in the last place, keep them exact."""
    if weights is None:
        d = values - values.mean(axis=-1, keepdims=True)
        d -= d.mean(axis=-1, keepdims=True)
    else:
        assert inverse_total is not None
        d = values - ((weights * values).sum(axis=-1) * inverse_total)[:, None]
        d -= ((weights * d).sum(axis=-1) * inverse_total)[:, None]
    return np.asarray(d, dtype=np.float64)


def _pearson_of_deviations(
    dx: npt.NDArray[np.float64],
    dy: npt.NDArray[np.float64],
    sxy: npt.NDArray[np.float64],
    weights_x: npt.NDArray[np.float64] | float,
    weights_y: npt.NDArray[np.float64] | float,
) -> npt.NDArray[np.float64]:
    # deviations of unit-scaled values: their squares sum to at least ~1e-33 (two distinct
    # floats near the largest differ by an ulp) and at most 4 per pair, far from both limits
    sxx = (weights_x * dx * dx).sum(axis=-1)
    syy = (weights_y * dy * dy).sum(axis=-1)
    den = np.sqrt(sxx) * np.sqrt(syy)
    r = sxy / np.where(den > 0, den, np.nan)  # no spread: NaN (the callers mark it undefined)
    return np.asarray(np.minimum(np.maximum(r, -1.0), 1.0), dtype=np.float64)


def row_pearson(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Pearson of each row pair of two equally shaped 2-D arrays; NaN for a constant row
    (all values equal, compared exactly, as scipy decides it). Any finite values: rows
    are brought to the unit scale (`_unit_scale`) and centred (`_centred`) before any
    product, so 1e-320 and 1e300 give scipy's coefficient, not 0/0 or inf/inf."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    da = _centred(a if _ordinary(a) else _unit_scale(a))
    db = _centred(b if _ordinary(b) else _unit_scale(b))
    r = _pearson_of_deviations(da, db, (da * db).sum(axis=1), 1.0, 1.0)
    r[(a.max(axis=1) == a.min(axis=1)) | (b.max(axis=1) == b.min(axis=1))] = np.nan
    return r


def table_pearson(
    tables: npt.NDArray[np.float64],
    tx: npt.NDArray[np.float64],
    ty: npt.NDArray[np.float64],
    x_values: npt.NDArray[np.float64],
    y_values: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Pearson per joint table of counts (rows x nx x ny, with margins `tx` = sum over y
    and `ty` = sum over x): the pairs (x_values[.., i], y_values[.., j]) counted
    tables[r, i, j] times. `x_values` and `y_values` are one vector for every table or one
    row per table (midranks). As `row_pearson`: scaled by a power of two per table over
    the values it holds, centred, then multiplied; NaN for a table with fewer than two
    distinct values on a side."""
    t = np.asarray(tables, dtype=np.float64)
    n = tx.sum(axis=1)
    inverse = 1.0 / np.where(n > 0, n, 1.0)  # empty tables are marked undefined below
    hx, hy = tx > 0, ty > 0
    dx = _table_deviations(x_values, tx, inverse, hx)
    dy = _table_deviations(y_values, ty, inverse, hy)
    r = _pearson_of_deviations(dx, dy, np.einsum("rij,ri,rj->r", t, dx, dy), tx, ty)
    r[(hx.sum(axis=1) < 2) | (hy.sum(axis=1) < 2)] = np.nan
    return r


def _table_deviations(
    values: npt.NDArray[np.float64],
    margins: npt.NDArray[np.float64],
    inverse_total: npt.NDArray[np.float64],
    present: npt.NDArray[np.bool_],
) -> npt.NDArray[np.float64]:
    """`table_pearson`'s deviations of one side; values absent from a table count 0."""
    if _ordinary(values):
        return _centred(np.broadcast_to(values, margins.shape), margins, inverse_total)
    scaled = _unit_scale(np.broadcast_to(values, margins.shape), present)
    return np.where(present, _centred(scaled, margins, inverse_total), 0.0)


def _ordinary(values: npt.NDArray[np.float64]) -> bool:
    """All |values| are 0 or within 2**±400: two distinct ones differ by at least 2**-452,
    whose square is a normal float, and n squares of them stay far below overflow, so
    `_unit_scale` would change nothing that matters (Likert scores, midranks, most raw
    metrics: the bootstrap's hot path skips it)."""
    magnitude = np.abs(values)
    low = float(np.min(magnitude, where=magnitude > 0, initial=np.inf))
    return float(magnitude.max(initial=0.0)) < 2.0**400 and low > 2.0**-400


def row_tau_b(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Kendall's tau-b of each row pair (all pairs of columns); NaN for a constant row.
    Pairs are ordered by comparison, not by the sign of a difference (which overflows)."""
    i, j = np.triu_indices(a.shape[1], k=1)
    sa = (a[:, i] > a[:, j]).astype(np.float64) - (a[:, i] < a[:, j])
    sb = (b[:, i] > b[:, j]).astype(np.float64) - (b[:, i] < b[:, j])
    s = (sa * sb).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = s / np.sqrt((sa != 0).sum(axis=1) * (sb != 0).sum(axis=1))
    tau[((sa != 0).sum(axis=1) == 0) | ((sb != 0).sum(axis=1) == 0)] = np.nan
    return np.asarray(tau, dtype=np.float64)
