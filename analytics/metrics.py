"""Agreement and correlation coefficients, pure (numpy/scipy, no Django).

Where a well-kept library computes a coefficient exactly it is used: Krippendorff's alpha
(`krippendorff`), Pearson, Spearman and Kendall's tau-b (`scipy.stats`). The rest is written
here and each is checked in tests/analytics/test_metrics.py against the worked example of
the paper or textbook that defines it:

- Fleiss' kappa (Fleiss 1971), generalised to units with different numbers of raters;
- Cohen's kappa, unweighted (Cohen 1960);
- the six intraclass correlations of Shrout & Fleiss (1979).

Conventions: a *reliability matrix* has one row per rater and one column per unit, with
NaN where a rater did not rate a unit (Krippendorff's layout). Category codes are numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import krippendorff
import numpy as np
from scipy import stats

ALPHA_LEVELS = ("nominal", "ordinal", "interval", "ratio")


def _matrix(reliability) -> np.ndarray:
    data = np.asarray(reliability, dtype=float)
    if data.ndim != 2:
        raise ValueError("a reliability matrix has one row per rater and one column per unit")
    return data


def _pairable(data: np.ndarray) -> np.ndarray:
    """Columns (units) with at least two ratings: the only ones agreement can use."""
    return data[:, np.sum(~np.isnan(data), axis=0) >= 2]


def krippendorff_alpha(reliability, level: str) -> float | None:
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
        krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=domain)
    )


def category_counts(reliability, categories=None) -> tuple[np.ndarray, np.ndarray]:
    """(units x categories) counts of the ratings each unit got, and the categories."""
    data = _matrix(reliability)
    values = data[~np.isnan(data)]
    cats = np.unique(values) if categories is None else np.asarray(categories, dtype=float)
    counts = np.stack([np.sum(data == c, axis=0) for c in cats], axis=1)
    return counts, cats


def fleiss_kappa(counts) -> float | None:
    """Fleiss' kappa from a (units x categories) table of rating counts.

    Units may have different numbers of ratings n_i (units with fewer than two are left
    out): P_i = sum_j n_ij (n_ij - 1) / (n_i (n_i - 1)), P-bar their mean, p_j the share of
    all ratings in category j, P-bar_e = sum_j p_j^2. With equal n_i this is Fleiss (1971).
    None when undefined (no units, or P-bar_e = 1).
    """
    table = np.asarray(counts, dtype=float)
    n = table.sum(axis=1)
    table, n = table[n >= 2], n[n >= 2]
    if table.shape[0] == 0:
        return None
    p_i = (table * (table - 1)).sum(axis=1) / (n * (n - 1))
    p_bar = p_i.mean()
    p_j = table.sum(axis=0) / n.sum()
    p_e = float((p_j**2).sum())
    if np.isclose(p_e, 1.0):
        return None
    return float((p_bar - p_e) / (1 - p_e))


def cohen_kappa(first, second) -> float | None:
    """Cohen's (1960) kappa of two raters over the units both rated (NaN = not rated)."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[both], b[both]
    if a.size == 0:
        return None
    cats = np.unique(np.concatenate([a, b]))
    observed = float(np.mean(a == b))
    expected = float(sum(np.mean(a == c) * np.mean(b == c) for c in cats))
    if np.isclose(expected, 1.0):
        return None
    return (observed - expected) / (1 - expected)


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


def icc(ratings) -> ICC | None:
    """From a complete (targets x judges) matrix (no missing values); None with fewer than
    two targets or judges, or when the targets do not vary at all."""
    x = np.asarray(ratings, dtype=float)
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


def correlate(x, y) -> Correlation:
    """Pearson, Spearman and Kendall's tau-b (scipy) and the agreement figures of paired
    scores (pairs with a missing side are left out). A coefficient is None when undefined
    (fewer than two pairs, or a constant side)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
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
