"""Agreement and correlation coefficients, pure (numpy/scipy, no Django).

Where a well-kept library computes a coefficient exactly it is used: Krippendorff's alpha
(`krippendorff`), Pearson, Spearman and Kendall's tau-b (`scipy.stats`). The rest is written
here and each is checked in tests/analytics/test_metrics.py against the worked example of
the paper or textbook that defines it:

- Fleiss' kappa (Fleiss 1971), generalised to units with different numbers of raters, and
  Gwet's AC1 (Gwet 2008, 2014);
- Cohen's kappa, unweighted (Cohen 1960) and weighted (Cohen 1968);
- the six intraclass correlations of Shrout & Fleiss (1979).

Conventions: a *reliability matrix* has one row per rater and one column per unit, with
NaN where a rater did not rate a unit (Krippendorff's layout). Category codes are numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

import krippendorff
import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike
from scipy import stats

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
    grand = x.mean()
    ss_total = float(((x - grand) ** 2).sum())
    ss_targets = float(k * ((x.mean(axis=1) - grand) ** 2).sum())
    ss_judges = float(n * ((x.mean(axis=0) - grand) ** 2).sum())
    ss_error = ss_total - ss_targets - ss_judges
    bms = ss_targets / (n - 1)
    wms = (ss_total - ss_targets) / (n * (k - 1))
    jms = ss_judges / (k - 1)
    ems = ss_error / ((n - 1) * (k - 1))
    if np.isclose(bms, 0.0):
        return None
    return ICC(
        ICC1=(bms - wms) / (bms + (k - 1) * wms),
        ICC1k=(bms - wms) / bms,
        ICC2=(bms - ems) / (bms + (k - 1) * ems + k * (jms - ems) / n),
        ICC2k=(bms - ems) / (bms + (jms - ems) / n),
        ICC3=(bms - ems) / (bms + (k - 1) * ems),
        ICC3k=(bms - ems) / bms,
        n=n,
        k=k,
    )


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
    """Pearson, Spearman and Kendall's tau-b (scipy) and the agreement figures of paired
    scores (pairs with a missing side are left out). A coefficient is None when undefined
    (fewer than two pairs, or a constant side)."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[keep], b[keep]
    n = int(a.size)
    if n == 0:
        return Correlation(0, None, None, None, None, None, None)
    diff = np.abs(a - b)
    mae, exact, within = float(diff.mean()), float(np.mean(diff < 0.5)), float(np.mean(diff <= 1))
    if n < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return Correlation(n, None, None, None, mae, exact, within)
    return Correlation(
        n=n,
        pearson=float(stats.pearsonr(a, b).statistic),
        spearman=float(stats.spearmanr(a, b).statistic),
        kendall=float(stats.kendalltau(a, b, variant="b").statistic),
        mae=mae,
        exact=exact,
        within_one=within,
    )


def grouped_correlations(
    x: ArrayLike, y: ArrayLike, groups: ArrayLike
) -> dict[str, npt.NDArray[np.float64]]:
    """Pearson, Spearman and Kendall's tau-b within each group (e.g. the systems' responses
    to one item), vectorised over groups of equal size; NaN where undefined (fewer than two
    pairs or a constant side). Returns arrays aligned with `np.unique(groups)`. Equal to
    scipy's per-group results (tests/analytics/test_metrics.py)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keys, group = np.unique(np.asarray(groups), return_inverse=True)
    out = {name: np.full(keys.size, np.nan) for name in ("pearson", "spearman", "kendall")}
    order = np.argsort(group, kind="stable")
    sizes = np.bincount(group, minlength=keys.size)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for size in np.unique(sizes):
        if size < 2:
            continue
        which = np.flatnonzero(sizes == size)
        idx = order[starts[which][:, None] + np.arange(size)]
        gx, gy = x[idx], y[idx]
        out["pearson"][which] = row_pearson(gx, gy)
        out["spearman"][which] = row_pearson(stats.rankdata(gx, axis=1), stats.rankdata(gy, axis=1))
        out["kendall"][which] = row_tau_b(gx, gy)
    return out


def row_pearson(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Pearson of each row pair of two equally shaped 2-D arrays; NaN for a constant row."""
    da = a - a.mean(axis=1, keepdims=True)
    db = b - b.mean(axis=1, keepdims=True)
    num = (da * db).sum(axis=1)
    den = np.sqrt((da * da).sum(axis=1) * (db * db).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = num / den
    r[(np.ptp(a, axis=1) == 0) | (np.ptp(b, axis=1) == 0)] = np.nan
    return np.asarray(r, dtype=np.float64)


def row_tau_b(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Kendall's tau-b of each row pair (all pairs of columns); NaN for a constant row."""
    i, j = np.triu_indices(a.shape[1], k=1)
    sa, sb = np.sign(a[:, i] - a[:, j]), np.sign(b[:, i] - b[:, j])
    s = (sa * sb).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = s / np.sqrt((sa != 0).sum(axis=1) * (sb != 0).sum(axis=1))
    tau[((sa != 0).sum(axis=1) == 0) | ((sb != 0).sum(axis=1) == 0)] = np.nan
    return np.asarray(tau, dtype=np.float64)
