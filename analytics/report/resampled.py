"""Every agreement and correlation figure of the report written as a function of sums over
units, so that analytics.bootstrap.Resampler gives it an item-resampling interval exactly
(a resample's sums are the count-weighted sums of its items' sums).

Each `*_register` function adds one statistic to a Resampler and names where its interval
goes (`sink[key]`, filled by `Resampler.run()`). The sums reproduce the point estimates of
analytics.report.build and analytics.metrics: tests/analytics/test_resampled.py checks each
interval's estimate against them, and a resample against the statistic recomputed on the
explicitly expanded resample.

- Krippendorff's alpha: per-unit coincidence matrices (bootstrap.py).
- Fleiss' kappa and Gwet's AC1 (generalised to any number of raters per unit, Gwet 2014):
  per unit, its agreement term and pairable flag, and its category shares and rated flag.
- Cohen's kappa (two raters): the two raters' joint table of categories.
- ICC (Shrout & Fleiss 1979): the ANOVA's sums — units, sum, sum of squares, sum of squared
  unit totals and (complete design) each rater's total.
- Mean pairwise Spearman and the leave-one-out ceiling: one joint table per rater pair or
  per annotator, ranks from its margins.
- Instance level: the joint table of (human value, judge value), or the cells of it the
  sample holds when no figure needs it whole: Pearson, Spearman, Kendall's tau-b, MAE,
  exact and within-one agreement.
- Item level: each item's correlations (fixed per item) and whether they are defined.
- System level: per system the integer numerators of the human means over one common
  denominator and the judge's sum, so that equal means in a resample stay equal floats.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from fractions import Fraction
from itertools import combinations
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from analytics import metrics
from analytics.bootstrap import (
    IntervalDict,
    Resampler,
    Sink,
    _alpha_from,
    _codes,
    _coincidences,
    _stats_from_cells,
    _stats_from_tables,
    cell_margins,
    cell_table,
    over_cells,
    tau_b_from,
    tau_b_tables,
    tau_by_items,
)

# scipy is imported where used: at module top it added ~0.5 s of CPU to every process start
if TYPE_CHECKING:
    from scipy import sparse

#: Kendall's tau-b intervals are computed from the joint table when it has at most this
#: many cells (distinct human values x distinct judge values); beyond it (a judge's raw
#: continuous values) only Pearson and Spearman get intervals.
MAX_TAU_CELLS = 10_000
#: The common denominator of human means is used while it stays this small.
MAX_COMMON_DENOMINATOR = 1_000_000


def _nanmean_rows(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows are NaN
        return np.asarray(np.nanmean(values, axis=1), dtype=np.float64)


def _safe_div(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)


def _onehot(codes: npt.NDArray[np.intp], width: int) -> sparse.coo_matrix:
    from scipy import sparse

    return sparse.coo_matrix(
        (np.ones(codes.size), (np.arange(codes.size), codes)), shape=(codes.size, width)
    )


# --- agreement ---------------------------------------------------------------------------------


def alpha_register(
    rs: Resampler, matrix: ArrayLike, unit_items: ArrayLike, *, sink: Sink, key: str
) -> None:
    data = np.asarray(matrix, dtype=np.float64)
    values = np.unique(data[~np.isnan(data)])
    if values.size < 2:
        sink[key] = {level: _none() for level in metrics.ALPHA_LEVELS}
        return
    per_unit, keep = _coincidences(data, values)
    v = values.size

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        o = sums.reshape(-1, v, v)
        return {level: _alpha_from(o, level, values) for level in metrics.ALPHA_LEVELS}

    rs.add(np.asarray(unit_items)[keep], per_unit.reshape(-1, v * v), fn, sink=sink, key=key)


def kappa_register(
    rs: Resampler,
    counts: ArrayLike,
    unit_items: ArrayLike,
    n_categories: int,
    *,
    sink: Sink,
    key: str,
) -> None:
    """Fleiss' kappa and Gwet's AC1 from a (units x categories) table of rating counts."""
    table = np.asarray(counts, dtype=np.float64)
    q = table.shape[1]
    r = table.sum(axis=1)
    pairable, rated = r >= 2, r >= 1
    agree = np.zeros(r.size)
    agree[pairable] = (table[pairable] * (table[pairable] - 1)).sum(axis=1) / (
        r[pairable] * (r[pairable] - 1)
    )
    shares = np.zeros_like(table)
    shares[rated] = table[rated] / r[rated, None]
    features = np.column_stack([agree, pairable, shares, rated]).astype(np.float64)

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        p_a = _safe_div(sums[:, 0], sums[:, 1])
        pi = sums[:, 2 : 2 + q] / np.where(sums[:, 2 + q] > 0, sums[:, 2 + q], np.nan)[:, None]
        pe_fleiss = (pi**2).sum(axis=1)
        pe_gwet = (pi * (1 - pi)).sum(axis=1) / max(n_categories - 1, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            fleiss = (p_a - pe_fleiss) / (1 - pe_fleiss)
            ac1 = (p_a - pe_gwet) / (1 - pe_gwet)
        fleiss[np.isclose(pe_fleiss, 1.0)] = np.nan
        ac1[np.isclose(pe_gwet, 1.0) | (n_categories < 2)] = np.nan
        return {"fleiss_kappa": fleiss, "gwet_ac1": ac1}

    rs.add(unit_items, features, fn, sink=sink, key=key)


def cohen_register(
    rs: Resampler,
    first: ArrayLike,
    second: ArrayLike,
    unit_items: ArrayLike,
    categories: ArrayLike | None,
    *,
    sink: Sink,
    key: str,
) -> None:
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b, items = a[both], b[both], np.asarray(unit_items)[both]
    if a.size == 0:
        sink[key] = {w: _none() for w in metrics.KAPPA_WEIGHTS}
        return
    cats = np.unique(np.concatenate([a, b])) if categories is None else np.sort(categories)
    q = cats.size
    codes = np.searchsorted(cats, a) * q + np.searchsorted(cats, b)
    i, j = np.meshgrid(np.arange(q), np.arange(q), indexing="ij")
    weights = {
        "unweighted": (i != j).astype(float),
        "linear": np.abs(i - j).astype(float),
        "quadratic": ((i - j) ** 2).astype(float),
    }

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        t = sums.reshape(-1, q, q)
        n = t.sum(axis=(1, 2))
        with np.errstate(divide="ignore", invalid="ignore"):
            observed = t / n[:, None, None]
        expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :]
        out: dict[str, npt.NDArray[np.float64]] = {}
        for name, w in weights.items():
            chance = (w * expected).sum(axis=(1, 2))
            with np.errstate(divide="ignore", invalid="ignore"):
                kappa = 1 - (w * observed).sum(axis=(1, 2)) / chance
            kappa[np.isclose(chance, 0.0) | (n == 0)] = np.nan
            out[name] = kappa
        return out

    rs.add(items, _onehot(codes, q * q), fn, sink=sink, key=key)


def icc_register(
    rs: Resampler, slots: ArrayLike, unit_items: ArrayLike, *, complete: bool, sink: Sink, key: str
) -> None:
    """ICCs of a (units x k) matrix of scores: all six forms on a complete design (the same
    k raters in every column), ICC1 and ICC1k on a one-way design (k scores per unit from
    raters that differ per unit)."""
    x = metrics.icc_scaled(np.asarray(slots, dtype=np.float64))
    k = x.shape[1]
    totals = x.sum(axis=1)
    base = [np.ones(x.shape[0]), totals, (x**2).sum(axis=1), totals**2]
    features = np.column_stack(base + ([x[:, j] for j in range(k)] if complete else []))

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        n = sums[:, 0]
        big_n = n * k
        with np.errstate(divide="ignore", invalid="ignore"):
            correction = sums[:, 1] ** 2 / big_n
            ss_total = sums[:, 2] - correction
            ss_targets = sums[:, 3] / k - correction
            bms = ss_targets / (n - 1)
            wms = (ss_total - ss_targets) / (n * (k - 1))
            out: dict[str, npt.NDArray[np.float64]] = {
                "ICC1": (bms - wms) / (bms + (k - 1) * wms),
                "ICC1k": (bms - wms) / bms,
            }
            if complete:
                ss_judges = (sums[:, 4 : 4 + k] ** 2).sum(axis=1) / n - correction
                jms = ss_judges / (k - 1)
                ems = (ss_total - ss_targets - ss_judges) / ((n - 1) * (k - 1))
                out["ICC2"] = (bms - ems) / (bms + (k - 1) * ems + k * (jms - ems) / n)
                out["ICC2k"] = (bms - ems) / (bms + (jms - ems) / n)
                out["ICC3"] = (bms - ems) / (bms + (k - 1) * ems)
                out["ICC3k"] = (bms - ems) / bms
        undefined = (n < 2) | np.isclose(bms, 0.0)
        for value in out.values():
            value[undefined] = np.nan
        return out

    rs.add(unit_items, features, fn, sink=sink, key=key)


def rater_pairs(
    matrix: npt.NDArray[np.float64],
) -> tuple[
    npt.NDArray[np.intp], npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.intp]
]:
    """Every two raters' scores on the units both scored, collected per unit (a unit with m
    scores gives m(m-1)/2 pairs): (pair ids, first scores, second scores, unit indexes),
    sorted by pair id. Cost follows the scores, not the number of raters squared."""
    present = ~np.isnan(matrix)
    per_unit = present.sum(axis=0)
    order = np.argsort(~present, axis=0, kind="stable")  # each unit's raters first
    n_raters = matrix.shape[0]
    ids: list[npt.NDArray[np.intp]] = []
    xs: list[npt.NDArray[np.float64]] = []
    ys: list[npt.NDArray[np.float64]] = []
    us: list[npt.NDArray[np.intp]] = []
    for m in np.unique(per_unit[per_unit >= 2]):
        units = np.flatnonzero(per_unit == m)
        raters = order[:m, units]
        for i, j in combinations(range(m), 2):
            a, b = raters[i], raters[j]
            ids.append(a * n_raters + b)
            xs.append(matrix[a, units])
            ys.append(matrix[b, units])
            us.append(units)
    if not ids:
        empty = np.array([], dtype=float)
        return empty.astype(int), empty, empty, empty.astype(int)
    pid, x, y, u = np.concatenate(ids), np.concatenate(xs), np.concatenate(ys), np.concatenate(us)
    sort = np.argsort(pid, kind="stable")
    return pid[sort], x[sort], y[sort], u[sort]


def _table_spearman_mean(
    rs: Resampler,
    codes_x: npt.NDArray[np.intp],
    codes_y: npt.NDArray[np.intp],
    group: npt.NDArray[np.intp],
    n_groups: int,
    vx: npt.NDArray[np.float64],
    vy: npt.NDArray[np.float64],
    items: ArrayLike,
    fn_names: Sequence[tuple[str, str]],
    *,
    sink: Sink,
    key: str,
    single: bool = False,
) -> None:
    """Mean over groups (rater pairs, annotators) of per-group Pearson/Spearman from each
    group's joint table; a group counts in a resample when it has three or more pairs and
    variation on both sides."""
    nx, ny = vx.size, vy.size
    cells = group * nx * ny + codes_x * ny + codes_y
    with_pearson = any(src == "pearson" for _, src in fn_names)

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        t = sums.reshape(-1, nx, ny)
        pearson, spearman = _stats_from_tables(t, vx, vy, pearson=with_pearson)
        few = t.sum(axis=(1, 2)) < 3
        shaped = (
            {"spearman": spearman}
            if pearson is None
            else {"pearson": pearson, "spearman": spearman}
        )
        for values in shaped.values():
            values[few] = np.nan
        return {out: _nanmean_rows(shaped[src].reshape(-1, n_groups)) for out, src in fn_names}

    rs.add(items, _onehot(cells, n_groups * nx * ny), fn, sink=sink, key=key, single=single)


def pairwise_spearman_register(
    rs: Resampler, matrix: npt.NDArray[np.float64], unit_items: ArrayLike, *, sink: Sink, key: str
) -> tuple[int, int]:
    """The mean pairwise Spearman (build._mean_pairwise_spearman) over the annotator pairs
    sharing at least three units with variation on both sides; returns how many pairs, and
    how many distinct units they cover."""
    pid, x, y, unit = rater_pairs(matrix)
    kept_pairs: npt.NDArray[np.intp] = np.array([], dtype=np.int64)
    keep = np.zeros(pid.size, dtype=bool)
    if pid.size:
        # per pair (pid is sorted): at least three units and variation on both sides
        starts = np.r_[0, np.flatnonzero(np.diff(pid)) + 1]
        sizes = np.diff(np.r_[starts, pid.size])
        varies_x = np.maximum.reduceat(x, starts) > np.minimum.reduceat(x, starts)
        varies_y = np.maximum.reduceat(y, starts) > np.minimum.reduceat(y, starts)
        good = (sizes >= 3) & varies_x & varies_y
        keep = np.repeat(good, sizes)
        kept_pairs = pid[starts[good]]
    if not kept_pairs.size:
        sink[key] = _none()
        return 0, 0
    values = np.unique(np.concatenate([x[keep], y[keep]]))
    group = np.searchsorted(kept_pairs, pid[keep])
    _table_spearman_mean(
        rs,
        np.searchsorted(values, x[keep]),
        np.searchsorted(values, y[keep]),
        group,
        kept_pairs.size,
        values,
        values,
        np.asarray(unit_items)[unit[keep]],
        [("value", "spearman")],
        sink=sink,
        key=key,
        single=True,
    )
    return int(kept_pairs.size), int(np.unique(unit[keep]).size)


class LooSide(NamedTuple):
    """One annotator in the leave-one-out ceiling: their scores, the mean of the others'
    scores on the same units, and those units' indexes."""

    own: npt.NDArray[np.float64]
    rest: npt.NDArray[np.float64]
    units: npt.NDArray[np.intp]


def loo_sides(matrix: npt.NDArray[np.float64]) -> list[LooSide]:
    """The leave-one-out ceiling's rule, its one source (report.build._loo_ceiling and
    `loo_register` both read it): each annotator against the mean of the others on the units
    they share, for the annotators with at least three such units and variation on both
    sides (elsewhere the correlation is undefined). The others' mean comes from the column
    sums and counts less the annotator's own score."""
    present = ~np.isnan(matrix)
    values = np.where(present, matrix, 0.0)
    # near the largest float a unit's sum would overflow: sum at a power-of-two scale
    # (exact) and scale the means back
    top = float(np.abs(values).max(initial=0.0))
    shift = 0
    if not math.isfinite(top * max(matrix.shape[0], 1)):
        shift = int(np.frexp(top)[1]) + matrix.shape[0].bit_length()
        values = np.ldexp(values, -shift)
    sums, counts = values.sum(axis=0), present.sum(axis=0)
    sides: list[LooSide] = []
    for r in range(matrix.shape[0]):
        mine = present[r] & (counts >= 2)
        if mine.sum() < 3:
            continue
        own = matrix[r, mine]
        rest = np.ldexp((sums[mine] - values[r, mine]) / (counts[mine] - 1), shift)
        if np.ptp(own) == 0 or np.ptp(rest) == 0:
            continue
        sides.append(LooSide(own, rest, np.flatnonzero(mine)))
    return sides


def loo_register(
    rs: Resampler, matrix: npt.NDArray[np.float64], unit_items: ArrayLike, *, sink: Sink, key: str
) -> tuple[int, int]:
    """The leave-one-out ceiling (`loo_sides`) with its interval; returns how many
    annotators it averages over, and how many distinct units they cover."""
    sides = loo_sides(matrix)
    if not sides:
        sink[key] = {"pearson": _none(), "spearman": _none()}
        return 0, 0
    own = np.concatenate([side.own for side in sides])
    rest = np.concatenate([side.rest for side in sides])
    groups = np.concatenate([np.full(side.own.size, g) for g, side in enumerate(sides)])
    vx, cx = _codes(own)
    vy, cy = _codes(rest)
    _table_spearman_mean(
        rs,
        cx,
        cy,
        groups,
        len(sides),
        vx,
        vy,
        np.asarray(unit_items)[np.concatenate([side.units for side in sides])],
        [("pearson", "pearson"), ("spearman", "spearman")],
        sink=sink,
        key=key,
    )
    return len(sides), sides_units(sides)


def sides_units(sides: Sequence[LooSide]) -> int:
    """The distinct units the leave-one-out ceiling's annotators cover (its n)."""
    return int(np.unique(np.concatenate([side.units for side in sides])).size) if sides else 0


# --- human-judge correlation -----------------------------------------------------------------


def instance_register(
    rs: Resampler,
    h: ArrayLike,
    j: ArrayLike,
    items: ArrayLike,
    *,
    sink: Sink,
    key: str = "ci",
    agreement: bool = True,
) -> None:
    """`agreement`: MAE, exact and within-one too (only for a judge on the skill's scale).
    A table that no figure needs whole (`bootstrap.over_cells`: Kendall's S counted from
    the items, or no Kendall) is resampled over the cells its sample holds
    (`_instance_cells_register`)."""
    vx, cx = _codes(h)
    vy, cy = _codes(j)
    nx, ny = vx.size, vy.size
    rows = np.asarray(items)
    with_tau = nx * ny <= MAX_TAU_CELLS
    if over_cells(nx * ny, rows) or not with_tau:
        _instance_cells_register(
            rs, (vx, cx), (vy, cy), rows, sink=sink, key=key, agreement=agreement
        )
        return
    with np.errstate(over="ignore"):  # a difference past the largest float is inf: not <= 1
        diff = np.abs(vx[:, None] - vy[None, :])
    scaled, exponent = _scaled_differences(vx, vy, _most_drawn(rows))
    cells = nx * ny

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        t = sums.reshape(-1, nx, ny)
        # the margins once for every figure (counts: whole numbers, any order sums them)
        margins = t.sum(axis=2), t.sum(axis=1)
        n = margins[0].sum(axis=1)
        pearson, spearman = _stats_from_tables(t, vx, vy, margins=margins)
        few = n < 2
        pearson[few] = np.nan
        spearman[few] = np.nan
        out = {"pearson": pearson, "spearman": spearman, "kendall": tau_b_tables(t, margins)}
        if agreement:
            with np.errstate(over="ignore"):
                out["mae"] = np.ldexp(_safe_div((t * scaled).sum(axis=(1, 2)), n), exponent)
            out["exact"] = _safe_div((t * (diff < 0.5)).sum(axis=(1, 2)), n)
            out["within_one"] = _safe_div((t * (diff <= 1)).sum(axis=(1, 2)), n)
        return out

    rs.add(rows, _onehot(cx * ny + cy, cells), fn, sink=sink, key=key)


def _most_drawn(items: npt.NDArray[np.generic]) -> int:
    """The most responses a resample can hold: every draw the item with the most."""
    _, per_item = np.unique(items, return_counts=True)
    return int(per_item.size * per_item.max(initial=0))


def _instance_cells_register(
    rs: Resampler,
    x: tuple[npt.NDArray[np.float64], npt.NDArray[np.intp]],
    y: tuple[npt.NDArray[np.float64], npt.NDArray[np.intp]],
    items: npt.NDArray[np.generic],
    *,
    sink: Sink,
    key: str,
    agreement: bool,
) -> None:
    """`instance_register` over the cells the sample holds (bootstrap.CellTable): a
    resample's sums are its cells' counts, Pearson and Spearman come from them
    (`_stats_from_cells`: the table's figures up to the last place of the cross sums),
    Kendall's S from the items (`_concordance_features`) when the table is within
    MAX_TAU_CELLS, and every count (n, the margins, S, exact and within-one) is the
    same whole number as the table's. A metric's tied raw values against 13 human means
    fill a few hundred of up to 10,000 cells: the table's way spent a resample on each."""
    (vx, cx), (vy, cy) = x, y
    table, cell = cell_table(cx, cy, vy.size)
    width = table.x.size
    features = _onehot(cell, width)
    rows = items
    q = 0
    by_items = vx.size * vy.size <= MAX_TAU_CELLS and tau_by_items(vx.size * vy.size, items)
    if by_items:
        keys, pair_features = _concordance_features(cx, cy, items)
        q = keys.size
        features = _stack_rows(features, pair_features, width)
        rows = np.concatenate([items, keys])
    if agreement:
        with np.errstate(over="ignore"):  # a difference past the largest float is inf
            diff = np.abs(vx[table.x] - vy[table.y])
        scaled, exponent = _scaled_differences(vx, vy, _most_drawn(items))
        scaled = scaled[table.x, table.y]

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        counts = sums[:, :width]
        margins = cell_margins(counts, table)
        n = margins[0].sum(axis=1)
        pearson, spearman = _stats_from_cells(counts, table, vx, vy, margins=margins)
        few = n < 2
        pearson[few] = np.nan
        spearman[few] = np.nan
        out = {"pearson": pearson, "spearman": spearman}
        if by_items:
            # S = w' G w / 2 (`_concordance_features`): whole numbers, exact in any order
            drawn, concordance = sums[:, width : width + q], sums[:, width + q :]
            out["kendall"] = tau_b_from((drawn * concordance).sum(axis=1) / 2, *margins)
        if agreement:
            with np.errstate(over="ignore"):
                out["mae"] = np.ldexp(_safe_div((counts * scaled).sum(axis=1), n), exponent)
            out["exact"] = _safe_div((counts * (diff < 0.5)).sum(axis=1), n)
            out["within_one"] = _safe_div((counts * (diff <= 1)).sum(axis=1), n)
        return out

    rs.add(rows, features, fn, sink=sink, key=key)


def _concordance_features(
    cx: npt.NDArray[np.intp], cy: npt.NDArray[np.intp], items: npt.NDArray[np.generic]
) -> tuple[npt.NDArray[np.generic], npt.NDArray[np.float64]]:
    """Kendall's S of a resample as a quadratic form in its item counts w: two responses a
    and b of items k and l drawn w_k and w_l times make w_k * w_l pairs of observations,
    each concordant (+1), discordant (-1) or tied (0) as a and b are, so
    S = w' G w / 2 with G[k, l] = sum over a in k, b in l of sign(x_a - x_b) sign(y_a - y_b).
    Returns the distinct items and, per item k, the features [e_k, G[k]]: a resample's
    sums are then [w, G w] and S = (w * G w).sum() / 2, a whole number (the same as
    counting the concordant and discordant pairs of its joint table, to the bit) at the
    cost of the items, not of the table's cells. The table's way spent most of a metric
    table's intervals (hundreds of distinct raw values with ties) on this count."""
    keys, code = np.unique(items, return_inverse=True)
    order = np.argsort(code, kind="stable")  # the responses item by item
    starts = np.flatnonzero(np.r_[True, np.diff(code[order]) != 0])
    x, y = cx[order].astype(np.int32), cy[order].astype(np.int32)
    signs = np.sign(x[:, None] - x[None, :]).astype(np.int8)
    signs *= np.sign(y[:, None] - y[None, :]).astype(np.int8)
    per_item = np.add.reduceat(signs, starts, axis=0, dtype=np.int32)
    g = np.add.reduceat(per_item, starts, axis=1)
    return keys, np.hstack([np.eye(keys.size), g.astype(np.float64)])


def _stack_rows(
    cells: sparse.coo_matrix, per_item: npt.NDArray[np.float64], offset: int
) -> sparse.coo_matrix:
    """`cells` (one row per response) above `per_item` (one row per item) placed at
    column `offset`: one statistic's features."""
    from scipy import sparse

    extra = sparse.coo_matrix(per_item)
    return sparse.coo_matrix(
        (
            np.concatenate([cells.data, extra.data]),
            (
                np.concatenate([cells.row, extra.row + cells.shape[0]]),
                np.concatenate([cells.col, extra.col + offset]),
            ),
        ),
        shape=(cells.shape[0] + extra.shape[0], offset + extra.shape[1]),
    )


def _scaled_differences(
    vx: npt.NDArray[np.float64], vy: npt.NDArray[np.float64], most: int
) -> tuple[npt.NDArray[np.float64], int]:
    """|vx_i - vy_j| as (d, e) with |vx_i - vy_j| = d_ij * 2**e, so that sums of up to
    `most` of them stay finite: the differences themselves (e = 0) unless a difference
    or such a sum would overflow (values near 1e308), and then halved and brought down by
    a power of two (exact but for differences 2**1074 times below the largest)."""
    with np.errstate(over="ignore"):
        d = np.abs(vx[:, None] - vy[None, :])
        if not d.size or math.isfinite(float(d.max()) * max(most, 1)):
            return d, 0
    half = np.abs(vx[:, None] * 0.5 - vy[None, :] * 0.5)
    shift = int(np.frexp(half.max())[1]) + max(most, 1).bit_length()
    return np.ldexp(half, -shift), shift + 1


def item_level_register(
    rs: Resampler,
    item_keys: ArrayLike,
    per_item: Mapping[str, npt.NDArray[np.float64]],
    *,
    sink: Sink,
    key: str = "ci",
) -> None:
    """The item level is the mean over items of each item's correlation, items where it is
    undefined left out: a resample's mean is the count-weighted mean of the items drawn."""
    used = ~np.isnan(per_item["pearson"])
    names = ("pearson", "spearman", "kendall")
    features = np.column_stack(
        [np.where(used, np.nan_to_num(per_item[n]), 0.0) for n in names] + [used.astype(float)]
    )

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        return {name: _safe_div(sums[:, i], sums[:, 3]) for i, name in enumerate(names)}

    rs.add(item_keys, features, fn, sink=sink, key=key)


def system_level_register(
    rs: Resampler,
    items: ArrayLike,
    systems: Sequence[str],
    totals: Sequence[float | Fraction],
    counts: Sequence[int],
    j: ArrayLike,
    *,
    sink: Sink,
    key: str = "ci",
) -> None:
    """Correlation of per-system means. Human means are exact: each response's mean is
    total/count; with whole totals they are summed as integers over one common denominator
    L (the lcm of the counts), and a system's mean is one division of two exact integers,
    so equal means in a resample are equal floats, as in the report's own system level."""
    from scipy import sparse

    names, sidx = np.unique(np.asarray(systems), return_inverse=True)
    s = names.size
    exact_totals = np.asarray(totals, dtype=object)
    count_array = np.asarray(counts, dtype=np.int64)
    whole = all(isinstance(t, int | np.integer) for t in exact_totals)
    common = math.lcm(*{int(c) for c in count_array}) if whole and count_array.size else 1
    if whole and common <= MAX_COMMON_DENOMINATOR:
        pairs = zip(exact_totals, count_array, strict=True)
        numerators = np.array([int(t) * (common // int(c)) for t, c in pairs], dtype=np.float64)
    else:
        common = 1
        numerators = np.array(
            [float(t) / int(c) for t, c in zip(exact_totals, count_array, strict=True)]
        )
    parts, shifts = _summable(np.asarray(j, dtype=np.float64), np.asarray(items))
    rows = np.arange(sidx.size)
    blocks = [numerators, np.ones(sidx.size), *parts]
    features = sparse.csr_matrix(
        (
            np.concatenate(blocks),
            (
                np.tile(rows, len(blocks)),
                np.concatenate([k * s + sidx for k in range(len(blocks))]),
            ),
        ),
        shape=(sidx.size, len(blocks) * s),
    )

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        c = sums[:, s : 2 * s]
        with np.errstate(divide="ignore", invalid="ignore"):
            human = sums[:, :s] / (c * common)
            judge_means = np.ldexp(sums[:, 2 * s : 3 * s] / c, shifts[0])
            for k, shift in enumerate(shifts[1:], start=3):
                judge_means += np.ldexp(sums[:, k * s : (k + 1) * s] / c, shift)
        out = {name: np.full(sums.shape[0], np.nan) for name in ("pearson", "spearman", "kendall")}
        full = (c > 0).all(axis=1)
        if full.any() and s >= 2:
            a, b = human[full], judge_means[full]
            out["pearson"][full] = metrics.row_pearson(a, b)
            out["spearman"][full] = metrics.row_pearson(metrics.midranks(a), metrics.midranks(b))
            out["kendall"][full] = metrics.row_tau_b(a, b)
        for row in np.flatnonzero(~full):  # a system not drawn: correlate the others
            present = c[row] > 0
            if present.sum() >= 2:
                r = metrics.correlate(human[row, present], judge_means[row, present])
                for name in out:
                    value = getattr(r, name)
                    out[name][row] = np.nan if value is None else value
        return out

    rs.add(items, features, fn, sink=sink, key=key)


def _summable(
    values: npt.NDArray[np.float64], items: npt.NDArray[np.generic]
) -> tuple[list[npt.NDArray[np.float64]], list[int]]:
    """`values` as parts whose sums over a resample stay finite: values = sum of
    parts[k] * 2**shifts[k]. One part, the values as they are, unless a resample's sum (of
    at most every drawn row) could pass the largest float; then the values from 1 up are
    brought down by the power of two that keeps such a sum finite and the smaller ones
    stay as they are (both exact, so a system of small values keeps its own mean)."""
    _, per_item = np.unique(items, return_counts=True)
    most = max(int(per_item.size * per_item.max(initial=0)), 1)
    top = float(np.abs(values).max(initial=0.0))
    if math.isfinite(top * most):
        return [values], [0]
    shift = int(np.frexp(top)[1]) + most.bit_length() - 1020
    big = np.abs(values) >= 1
    return [np.ldexp(np.where(big, values, 0.0), -shift), np.where(big, 0.0, values)], [shift, 0]


def _none() -> IntervalDict:
    return {"estimate": None, "low": None, "high": None, "resamples": 0}
