"""Bootstrap confidence intervals that resample *items* (clusters of responses), vectorised.

A resample is a vector of counts: how many times each item was drawn (multinomial, as many
draws as items). Every statistic here is recomputed from weighted sums, so one resample
costs a few passes over the data and resamples are processed in chunks whose size depends
on the data size, not on their number: memory stays proportional to the data.

- Pearson and Spearman: from the items x (x value, y value) table of counts; a resample's
  table is the count-weighted sum of its items' rows (one sparse product). Spearman is the
  Pearson of the resample's midranks, which follow from the table's margins (cumulative
  counts over the sorted distinct values), exactly as ranking the resample would give them.
- Krippendorff's alpha: from the coincidence matrix, which is a sum over units, so a
  resample's matrix is the weighted sum of per-item matrices (Krippendorff 2011, sections
  on the coincidence matrix and the difference functions, all four levels).

`analytics.metrics.krippendorff_alpha` (the library) and scipy check these on the full
sample in tests/analytics/test_bootstrap.py.

Every interval says how far it can be read (docs/SMALL_SAMPLES.md): `items`, the distinct
items whose data the statistic reads (the units a resample draws), and `flags`, empty when
the interval stands as shown, else why it does not (`interval_flags`): too few items to
resample (analytics.minimums, kind "interval"), resamples that all gave the same value, or
an interval that does not contain its estimate. Pages show such an interval as "no
interval" with the reason (`interval_note`), never as [x, x].
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, NotRequired, TypedDict, overload

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from analytics import metrics, minimums

# scipy is imported where used: at module top it added ~0.5 s of CPU to every process start
if TYPE_CHECKING:
    from scipy import sparse

CONFIDENCE = 0.95
_CELLS_PER_CHUNK = 2_000_000  # floats held at once per chunk of resamples
#: Resamples drawn at once by a Resampler (fewer when there are many items). Its sums are
#: made one statistic at a time, so a chunk costs the widest statistic's sums; larger
#: chunks spend less per call on the many small statistics of many judges (the figures do
#: not depend on it: a resample's counts come from the generator alone).
_RESAMPLES_PER_CHUNK = 256
#: Statistics with at most this many features are multiplied densely, all together, while
#: their dense item sums hold at most _DENSE_CELLS floats.
_NARROW = 256
_DENSE_CELLS = 30_000_000


class IntervalDict(TypedDict):
    """An Interval as the report holds it (JSON-ready). `items` and `flags`: see
    `interval_flags` (absent from intervals made before they existed)."""

    estimate: float | None
    low: float | None
    high: float | None
    resamples: int
    items: NotRequired[int]
    flags: NotRequired[list[str]]


class PairedDifference(IntervalDict):
    """`paired_difference`: the interval of Pearson(human, A) - Pearson(human, B) and the
    share of resamples where it is <= 0."""

    p_value_a_not_better: float | None


#: A Resampler statistic: summed features (resamples x features) -> named values, one per
#: resample (NaN where undefined).
StatFn = Callable[[npt.NDArray[np.float64]], dict[str, npt.NDArray[np.float64]]]
#: Where `Resampler.run()` writes a statistic's intervals: `sink[key]` becomes
#: {name: IntervalDict}, or one IntervalDict for a `single` statistic.
Sink = MutableMapping[str, object]


#: An interval's flags (`interval_flags`): why it does not stand as shown.
TOO_FEW_ITEMS = "too_few_items"
DEGENERATE = "degenerate_resamples"
EXCLUDES_ESTIMATE = "interval_excludes_estimate"


def interval_flags(
    estimate: float | None, low: float | None, high: float | None, items: int | None
) -> tuple[str, ...]:
    """Why an interval cannot be read as shown (empty when it can, or when there is no
    interval): fewer distinct items than an interval needs (minimums, kind "interval":
    most resamples repeat the same few), the 2.5 and 97.5 percentiles equal (the resamples
    collapse onto one value: 2 items give 3 distinct resamples), or an interval that does
    not contain its point estimate (minimums.interval_holds)."""
    if low is None or high is None:
        return ()
    flags: list[str] = []
    if items is not None and minimums.too_few("interval", items):
        flags.append(TOO_FEW_ITEMS)
    if high - low <= 1e-9 * max(1.0, abs(low), abs(high)):
        flags.append(DEGENERATE)
    if not minimums.interval_holds(estimate, low, high):
        flags.append(EXCLUDES_ESTIMATE)
    return tuple(flags)


def interval_note(interval: Mapping[str, Any] | None) -> str:
    """Why an interval of the report is not shown ("" when it is, or when there is none),
    from its `flags`, for a page: "2 items resampled (at least 10); all resamples gave the
    same value"."""
    found = interval or {}
    flags = found.get("flags") or ()
    notes = []
    if TOO_FEW_ITEMS in flags:
        items = int(found.get("items") or 0)
        floor = minimums.minimum("interval").n
        notes.append(f"{items} item{'' if items == 1 else 's'} resampled (at least {floor})")
    if DEGENERATE in flags:
        notes.append("all resamples gave the same value")
    if EXCLUDES_ESTIMATE in flags:
        notes.append("it does not contain the estimate")
    return "; ".join(notes)


@dataclass(frozen=True)
class Interval:
    estimate: float | None
    low: float | None
    high: float | None
    resamples: int  # resamples where the statistic was defined
    items: int | None = None  # distinct items whose data the statistic reads
    flags: tuple[str, ...] = ()  # `interval_flags`

    def as_dict(self) -> IntervalDict:
        found: IntervalDict = {
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "resamples": self.resamples,
        }
        if self.items is not None:
            found["items"] = self.items
            found["flags"] = list(self.flags)
        return found


def _chunks(
    n_items: int, n_points: int, resamples: int, rng: np.random.Generator, size: int = 0
) -> Iterator[npt.NDArray[np.float64]]:
    """Resamples as rows of item counts: each row draws `n_items` items with replacement
    (multinomial counts), by drawing indices and counting them per row, which is much
    faster than numpy's multinomial with many categories. The rows depend only on `rng`,
    not on the chunk size."""
    size = size or max(1, min(resamples, _CELLS_PER_CHUNK // max(1, n_points + n_items)))
    done = 0
    while done < resamples:
        take = min(size, resamples - done)
        drawn = rng.integers(0, n_items, size=(take, n_items), dtype=np.int64)
        drawn += (np.arange(take, dtype=np.int64) * n_items)[:, None]
        counts = np.bincount(drawn.ravel(), minlength=take * n_items).reshape(take, n_items)
        yield counts.astype(np.float64)
        done += take


def _interval(
    estimate: float | None, values: npt.NDArray[np.float64], items: int | None = None
) -> Interval:
    """The percentile interval of the resampled `values` (NaN: undefined) around
    `estimate`, flagged (`interval_flags`); `items`: the distinct items resampled."""
    values = values[np.isfinite(values)]
    if estimate is None or not np.isfinite(estimate) or values.size == 0:
        return Interval(None, None, None, int(values.size), items)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = (float(v) for v in np.percentile(values, [tail, 100 - tail]))
    flags = interval_flags(float(estimate), low, high, items)
    return Interval(float(estimate), low, high, int(values.size), items, flags)


def _codes(values: ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.intp]]:
    distinct, code = np.unique(np.asarray(values, dtype=np.float64), return_inverse=True)
    return distinct, code


def _joint(
    cluster: npt.NDArray[np.intp],
    n_items: int,
    cx: npt.NDArray[np.intp],
    nx: int,
    cy: npt.NDArray[np.intp],
    ny: int,
) -> sparse.csr_matrix:
    """Items x (x value, y value) counts: everything a resample's Pearson or Spearman needs."""
    from scipy import sparse

    cells = cx * ny + cy
    return sparse.csr_matrix((np.ones(cluster.size), (cluster, cells)), shape=(n_items, nx * ny))


@overload
def _stats_from_tables(
    tables: npt.NDArray[np.float64],
    vx: npt.NDArray[np.float64],
    vy: npt.NDArray[np.float64],
    *,
    pearson: Literal[True] = True,
    margins: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...


@overload
def _stats_from_tables(
    tables: npt.NDArray[np.float64],
    vx: npt.NDArray[np.float64],
    vy: npt.NDArray[np.float64],
    *,
    pearson: bool,
    margins: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None,
) -> tuple[npt.NDArray[np.float64] | None, npt.NDArray[np.float64]]: ...


def _stats_from_tables(
    tables: npt.NDArray[np.float64],
    vx: npt.NDArray[np.float64],
    vy: npt.NDArray[np.float64],
    *,
    pearson: bool = True,
    margins: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None,
) -> tuple[npt.NDArray[np.float64] | None, npt.NDArray[np.float64]]:
    """(Pearson, Spearman) per joint table (rows x nx x ny of counts); Pearson is None
    when not asked for. `margins`: the tables' (sums over y, sums over x), when known."""
    tx, ty = (tables.sum(axis=2), tables.sum(axis=1)) if margins is None else margins
    n = tx.sum(axis=1)  # counts: whole numbers, the same sum in any order
    rank_x = np.cumsum(tx, axis=1) - (tx - 1) / 2  # midrank of each distinct value
    rank_y = np.cumsum(ty, axis=1) - (ty - 1) / 2
    p = (
        _pearson_table(
            tables, n, tx, ty, np.broadcast_to(vx, tx.shape), np.broadcast_to(vy, ty.shape)
        )
        if pearson
        else None
    )
    return p, _pearson_table(tables, n, tx, ty, rank_x, rank_y)


def _pearson_table(
    tables: npt.NDArray[np.float64],
    n: npt.NDArray[np.float64],
    tx: npt.NDArray[np.float64],
    ty: npt.NDArray[np.float64],
    sx_vals: npt.NDArray[np.float64],
    sy_vals: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    # centred on the unit scale before any product (1e-320 or 1e300 values neither
    # underflow to 0/0 nor overflow), constant sides found exactly (metrics.table_pearson)
    return metrics.table_pearson(tables, tx, ty, sx_vals, sy_vals)


#: Joint tables with more cells than this (distinct x values times distinct y values: a
#: judge's raw continuous values against human means) are resampled over the cells the
#: sample holds (`CellTable`) instead of the whole, mostly empty, table. Not below
#: report.resampled.MAX_TAU_CELLS: Kendall's tau-b needs the whole table.
WIDE_TABLE_CELLS = 10_000
#: `tau_by_items` compares every two responses: up to this many pairs.
MAX_CONCORDANCE_PAIRS = 4_000_000


def tau_by_items(cells: int, items: npt.NDArray[np.generic]) -> bool:
    """Whether Kendall's S of the instance intervals is counted from the items
    (report.resampled._concordance_features: 2 features per item, every two responses
    compared once) rather than from each resample's table (a few passes over its cells):
    when the table is larger than four times the items and the responses are few enough
    to compare."""
    return items.size**2 <= MAX_CONCORDANCE_PAIRS and cells > 4 * np.unique(items).size


def over_cells(cells: int, items: npt.NDArray[np.generic]) -> bool:
    """Whether a joint table of `cells` cells (distinct x values times distinct y values;
    `items`: each pair's item) is resampled over the cells its sample holds (`CellTable`)
    rather than whole: when it is wide, or when Kendall's S comes from the items
    (`tau_by_items`), so that no figure needs the whole table. The instance intervals
    (report.resampled.instance_register) and `paired_difference` decide alike, so that a
    pair's difference is the difference of the two judges' own resampled Pearsons."""
    return cells > WIDE_TABLE_CELLS or tau_by_items(cells, items)


class CellTable(NamedTuple):
    """A joint table given by the cells the sample holds, sorted by (x, y): each cell's x
    and y codes, where each x code's cells start, and the cells in y order with where
    each y code's start. Every code of x and y has a cell (codes come from the sample).
    `x_sum` and `y_sum`: (distinct values x cells) one-hot matrices, each value's cells
    in cell order: times (cells x resamples) counts, the sums per x or y value."""

    x: npt.NDArray[np.intp]
    y: npt.NDArray[np.intp]
    x_starts: npt.NDArray[np.intp]
    y_order: npt.NDArray[np.intp]
    y_starts: npt.NDArray[np.intp]
    x_sum: sparse.csr_matrix
    y_sum: sparse.csr_matrix


def cell_table(
    cx: npt.NDArray[np.intp], cy: npt.NDArray[np.intp], ny: int
) -> tuple[CellTable, npt.NDArray[np.intp]]:
    """The cells of the pairs with codes (cx, cy), and each pair's cell."""
    from scipy import sparse

    present, cell = np.unique(cx * ny + cy, return_inverse=True)
    x, y = present // ny, present % ny
    y_order = np.argsort(y, kind="stable")
    ones, columns = np.ones(present.size), np.arange(present.size)
    return (
        CellTable(
            x,
            y,
            np.flatnonzero(np.r_[True, x[1:] != x[:-1]]),
            y_order,
            np.flatnonzero(np.r_[True, y[y_order][1:] != y[y_order][:-1]]),
            sparse.csr_matrix((ones, (x, columns)), shape=(int(x.max(initial=-1)) + 1, x.size)),
            sparse.csr_matrix((ones, (y, columns)), shape=(int(y.max(initial=-1)) + 1, y.size)),
        ),
        cell.reshape(-1),
    )


def cell_margins(
    cells: npt.NDArray[np.float64], table: CellTable
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The margins of tables given by their cells (rows x cells of counts): (rows x
    distinct x values, rows x distinct y values). Counts: whole numbers, exact in any
    order."""
    by_cell = np.ascontiguousarray(cells.T)  # no copy of a transposed product
    return (
        np.ascontiguousarray((table.x_sum @ by_cell).T),
        np.ascontiguousarray((table.y_sum @ by_cell).T),
    )


def _stats_from_cells(
    cells: npt.NDArray[np.float64],
    table: CellTable,
    vx: npt.NDArray[np.float64],
    vy: npt.NDArray[np.float64],
    *,
    margins: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """`_stats_from_tables` of tables given by their cells (rows x cells of counts; a
    transposed product, cells x rows in memory, is read as it is): the same margins,
    midranks and centred values; only the cross products are summed over the cells
    instead of the whole table (so they may differ in the last place). `margins`:
    `cell_margins(cells, table)`, when known."""
    by_cell = np.ascontiguousarray(cells.T)
    tx, ty = cell_margins(cells, table) if margins is None else margins
    n = tx.sum(axis=1)
    inverse = 1.0 / np.where(n > 0, n, 1.0)  # empty tables are marked undefined below
    hx, hy = tx > 0, ty > 0
    rank_x = np.cumsum(tx, axis=1) - (tx - 1) / 2
    rank_y = np.cumsum(ty, axis=1) - (ty - 1) / 2
    sides = (tx, ty, inverse)
    pearson = _pearson_cells(
        by_cell,
        table,
        sides,
        _cell_scale(vx, tx.shape, hx),
        _cell_scale(vy, ty.shape, hy),
    )
    # midranks lie in [1/2, n]: never scaled
    spearman = _pearson_cells(by_cell, table, sides, rank_x, rank_y)
    undefined = (hx.sum(axis=1) < 2) | (hy.sum(axis=1) < 2)
    pearson[undefined] = np.nan
    spearman[undefined] = np.nan
    return pearson, spearman


def _pearson_cells(
    by_cell: npt.NDArray[np.float64],
    table: CellTable,
    sides: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]],
    x_values: npt.NDArray[np.float64],
    y_values: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """metrics.table_pearson over the cells (`by_cell`: cells x rows of counts): the same
    centring (its helpers), the cross sum over the cells the sample holds, grouped by x
    value, each group summed in cell order (so it may differ from the table's in the last
    place). `sides`: the two margins and 1 / n.
    Values absent from a table weigh 0 in every sum, as the table's zeros do."""
    tx, ty, inverse = sides
    dx = metrics._centred(x_values, tx, inverse)
    dy = metrics._centred(y_values, ty, inverse)
    # per x value, the cells' counts times their y deviations; then times the x deviation
    weighted = np.take(np.ascontiguousarray(dy.T), table.y, axis=0)
    weighted *= by_cell
    sxy = (dx * (table.x_sum @ weighted).T).sum(axis=1)
    return metrics._pearson_of_deviations(dx, dy, sxy, tx, ty)


def _cell_scale(
    values: npt.NDArray[np.float64], shape: tuple[int, ...], present: npt.NDArray[np.bool_]
) -> npt.NDArray[np.float64]:
    """The distinct `values` for every table (`shape`), on the unit scale
    (`metrics._unit_scale`) where it can change a figure: values within 2**±200 (Likert
    scores, raw metrics) are left as they are. A power of two is exact, and between those
    bounds no deviation, product or sum of either form is subnormal or overflows
    (deviations are at least 2**-453 after scaling, their products above 2**-1022), so
    both give each coefficient to the bit: the scale cancels in sxy / (sqrt(sxx) sqrt(syy))."""
    magnitude = np.abs(values)
    low = float(np.min(magnitude, where=magnitude > 0, initial=np.inf))
    if float(magnitude.max(initial=0.0)) <= 2.0**200 and low >= 2.0**-200:
        return np.broadcast_to(values, shape)
    return metrics._unit_scale(np.broadcast_to(values, shape), present)


def correlation_intervals(
    x: ArrayLike, y: ArrayLike, items: ArrayLike, *, resamples: int = 1000, seed: int = 0
) -> dict[str, Interval]:
    """Pearson and Spearman of paired scores with item-resampling percentile intervals.
    `items` gives each pair's item (cluster). Works on the items x (x value, y value) count
    table, so a resample costs a product with a sparse matrix, whatever the points."""
    vx, cx = _codes(x)
    vy, cy = _codes(y)
    _, cluster = np.unique(np.asarray(items), return_inverse=True)
    n_items = int(cluster.max()) + 1 if cluster.size else 0
    if n_items == 0:
        empty = Interval(None, None, None, 0)
        return {"pearson": empty, "spearman": empty}
    joint = _joint(cluster, n_items, cx, vx.size, cy, vy.size)
    full = np.asarray(joint.sum(axis=0)).reshape(1, vx.size, vy.size)
    pearson, spearman = (float(v[0]) for v in _stats_from_tables(full, vx, vy))
    boot_p: list[npt.NDArray[np.float64]] = []
    boot_s: list[npt.NDArray[np.float64]] = []
    if n_items >= 2:
        rng = np.random.default_rng(seed)
        jt = joint.T.tocsr()
        for counts in _chunks(n_items, vx.size * vy.size, resamples, rng):
            tables = (jt @ counts.T).T.reshape(-1, vx.size, vy.size)
            p, s = _stats_from_tables(tables, vx, vy)
            boot_p.append(p)
            boot_s.append(s)
    return {
        "pearson": _interval(None if np.isnan(pearson) else pearson, _cat(boot_p), n_items),
        "spearman": _interval(None if np.isnan(spearman) else spearman, _cat(boot_s), n_items),
    }


def _cat(parts: Sequence[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
    return np.concatenate(parts) if parts else np.array([])


# --- Krippendorff's alpha from coincidence matrices -------------------------------------------


def _coincidences(
    matrix: npt.NDArray[np.float64], values: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """(units x V x V) coincidence contributions of the units (columns of `matrix`) with
    two or more values, and which units those are."""
    counts = np.stack([np.sum(matrix == v, axis=0) for v in values], axis=1).astype(np.float64)
    m = counts.sum(axis=1)
    keep = m >= 2
    counts, m = counts[keep], m[keep]
    outer = counts[:, :, None] * counts[:, None, :]
    outer[:, np.arange(values.size), np.arange(values.size)] -= counts
    return outer / (m - 1)[:, None, None], keep


def _delta2(
    level: str, values: npt.NDArray[np.float64], n_c: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Squared difference function per (rows of) marginals n_c: (rows x V x V)."""
    c, k = values[:, None], values[None, :]
    if level == "nominal":
        d = (c != k).astype(float)
        return np.broadcast_to(d, (n_c.shape[0], *d.shape))
    if level == "interval":
        d = (c - k) ** 2
        return np.broadcast_to(d, (n_c.shape[0], *d.shape))
    if level == "ratio":
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(c + k == 0, 0.0, ((c - k) / (c + k)) ** 2)
        return np.broadcast_to(d, (n_c.shape[0], *d.shape))
    # ordinal: (sum of n_g from c to k) - (n_c + n_k) / 2, squared, with the marginals
    cum = np.concatenate([np.zeros((n_c.shape[0], 1)), np.cumsum(n_c, axis=1)], axis=1)
    lo = np.minimum.outer(np.arange(values.size), np.arange(values.size))
    hi = np.maximum.outer(np.arange(values.size), np.arange(values.size))
    span = cum[:, hi + 1] - cum[:, lo]
    return np.asarray((span - (n_c[:, :, None] + n_c[:, None, :]) / 2) ** 2, dtype=np.float64)


def _alpha_from(
    o: npt.NDArray[np.float64], level: str, values: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Alpha per row of pooled coincidence matrices `o` (rows x V x V)."""
    n_c = o.sum(axis=2)
    n = n_c.sum(axis=1)
    d2 = _delta2(level, values, n_c)
    observed = (o * d2).sum(axis=(1, 2))
    expected = (n_c[:, :, None] * n_c[:, None, :] * d2).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1 - (n - 1) * observed / expected
    alpha[expected <= 0] = np.nan
    return np.asarray(alpha, dtype=np.float64)


def alpha_intervals(
    matrix: ArrayLike,
    unit_items: ArrayLike,
    *,
    levels: Sequence[str] = ("nominal", "ordinal", "interval", "ratio"),
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Interval]:
    """Krippendorff's alpha (raters x units matrix, NaN = missing) per level, with
    percentile intervals from resampling items (`unit_items`: each unit's item)."""
    data = np.asarray(matrix, dtype=np.float64)
    values = np.unique(data[~np.isnan(data)])
    if values.size < 2:
        return {level: Interval(None, None, None, 0) for level in levels}
    per_unit, keep = _coincidences(data, values)
    _, cluster = np.unique(np.asarray(unit_items)[keep], return_inverse=True)
    n_items = int(cluster.max()) + 1 if cluster.size else 0
    if n_items == 0:  # no unit rated twice: nothing to agree on, nothing to resample
        return {level: Interval(None, None, None, 0) for level in levels}
    per_item = np.zeros((n_items, values.size, values.size))
    np.add.at(per_item, cluster, per_unit)
    flat = per_item.reshape(n_items, -1)
    pooled = flat.sum(axis=0).reshape(1, values.size, values.size)
    out: dict[str, list[npt.NDArray[np.float64]]] = {level: [] for level in levels}
    if n_items >= 2:
        rng = np.random.default_rng(seed)
        for counts in _chunks(n_items, flat.shape[1], resamples, rng):
            o = (counts @ flat).reshape(-1, values.size, values.size)
            for level in levels:
                out[level].append(_alpha_from(o, level, values))
    result: dict[str, Interval] = {}
    for level in levels:
        estimate = float(_alpha_from(pooled, level, values)[0])
        boot = np.concatenate(out[level]) if out[level] else np.array([])
        result[level] = _interval(None if np.isnan(estimate) else estimate, boot, n_items)
    return result


class _PearsonSide:
    """One judge's side of `paired_difference`: Pearson(human, judge) per row of item
    counts, from the joint table or its cells (`over_cells`, as the instance intervals)."""

    def __init__(
        self,
        cluster: npt.NDArray[np.intp],
        n_items: int,
        ch: npt.NDArray[np.intp],
        vh: npt.NDArray[np.float64],
        cj: npt.NDArray[np.intp],
        vj: npt.NDArray[np.float64],
    ) -> None:
        from scipy import sparse

        self.vh, self.vj = vh, vj
        self.cells: CellTable | None = None
        if over_cells(vh.size * vj.size, cluster):
            self.cells, cell = cell_table(ch, cj, vj.size)
            self.width = self.cells.x.size
            joint = sparse.csr_matrix(
                (np.ones(cluster.size), (cluster, cell)), shape=(n_items, self.width)
            )
        else:
            self.width = vh.size * vj.size
            joint = _joint(cluster, n_items, ch, vh.size, cj, vj.size)
        self.joint_t = joint.T.tocsr()

    def pearson(self, counts: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        sums = (self.joint_t @ counts.T).T
        if self.cells is not None:
            return _stats_from_cells(sums, self.cells, self.vh, self.vj)[0]
        return _stats_from_tables(sums.reshape(-1, self.vh.size, self.vj.size), self.vh, self.vj)[0]


def paired_difference(
    human: ArrayLike,
    judge_a: ArrayLike,
    judge_b: ArrayLike,
    items: ArrayLike,
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> PairedDifference:
    """Is judge A closer to the people than judge B? Pearson(human, A) - Pearson(human, B)
    on the responses both judges scored, with an item-resampling interval (the same
    resamples for both) and the share of resamples where the difference is <= 0 (a
    one-sided bootstrap p-value)."""
    vh, ch = _codes(human)
    va, ca = _codes(judge_a)
    vb, cb = _codes(judge_b)
    _, cluster = np.unique(np.asarray(items), return_inverse=True)
    n_items = int(cluster.max()) + 1 if cluster.size else 0
    if n_items == 0:
        return {**Interval(None, None, None, 0).as_dict(), "p_value_a_not_better": None}
    side_a = _PearsonSide(cluster, n_items, ch, vh, ca, va)
    side_b = _PearsonSide(cluster, n_items, ch, vh, cb, vb)
    full = np.ones((1, n_items))
    estimate = float((side_a.pearson(full) - side_b.pearson(full))[0])
    boot: list[npt.NDArray[np.float64]] = []
    if n_items >= 2:
        rng = np.random.default_rng(seed)
        width = max(side_a.width, side_b.width)
        for counts in _chunks(n_items, width, resamples, rng):
            boot.append(side_a.pearson(counts) - side_b.pearson(counts))
    return _paired(None if np.isnan(estimate) else estimate, _cat(boot), n_items)


def paired_difference_of(
    estimate_a: float | None,
    estimate_b: float | None,
    values_a: npt.NDArray[np.float64],
    values_b: npt.NDArray[np.float64],
    items: int | None = None,
) -> PairedDifference:
    """`paired_difference` from the two Pearsons' estimates and resampled values, computed
    on the same resamples (kept by a Resampler that drew what `paired_difference` draws:
    the same items and seed): the same figures without resampling again. `items`: the
    distinct items the two judges' responses belong to."""
    if estimate_a is None or estimate_b is None:
        return _paired(None, values_a - values_b, items)
    return _paired(estimate_a - estimate_b, values_a - values_b, items)


def _paired(
    estimate: float | None, values: npt.NDArray[np.float64], items: int | None = None
) -> PairedDifference:
    interval = _interval(estimate, values, items)
    finite = values[np.isfinite(values)]
    p = float(np.mean(finite <= 0)) if finite.size else None
    return {**interval.as_dict(), "p_value_a_not_better": p}


# --- one set of resamples for many statistics --------------------------------------------------


class _Registered(NamedTuple):
    """One statistic of a Resampler: its features summed per item, transposed (features x
    items, CSC: what the products take), and where its intervals go."""

    features: sparse.csc_matrix
    fn: StatFn
    sink: Sink
    key: str
    single: bool
    items: int  # the distinct items its rows belong to


class Resampler:
    """Item-resampling intervals for many statistics over one universe of items, all
    computed on the same resamples (drawn once per chunk): the intervals of one skill are
    coherent with each other, and drawing costs once.

    A statistic is registered as per-row features (any rows: units, pairs, items) with the
    item each row belongs to, and a function from summed features (resamples x features)
    to named values (one per resample; NaN where undefined). A resample's sums are the
    count-weighted sums of its items' sums, so every statistic that is a function of sums
    over units is resampled exactly. The estimate is the function of the full sums; after
    `run()`, each registration's `sink[key]` holds {name: Interval.as_dict()} (or the one
    interval's dict when `single`), `items` counting the distinct items of its rows."""

    def __init__(
        self, items: ArrayLike, *, resamples: int, seed: int = 0, keep: bool = False
    ) -> None:
        self.keys: npt.NDArray[np.generic] = np.unique(np.asarray(items))
        self.resamples = resamples
        self.seed = seed
        self.keep = keep  # keep every resample's values in `values[key]` (for tests)
        self.values: dict[str, dict[str, npt.NDArray[np.float64]]] = {}
        self._stats: list[_Registered] = []
        self._done: list[Callable[[], None]] = []
        self._keep: set[tuple[int, str]] = set()
        self._kept: dict[tuple[int, str], npt.NDArray[np.float64]] = {}

    def keep_values(self, sink: Sink, name: str) -> None:
        """Keep every resample's value of `name` of the statistic whose intervals go to
        `sink`, for `kept_values()` after `run()`: a figure derived from two statistics on
        the same resamples (a paired difference of two judges' Pearson) then costs no
        resampling."""
        self._keep.add((id(sink), name))

    def kept_values(self, sink: Sink, name: str) -> npt.NDArray[np.float64]:
        """The values `keep_values(sink, name)` asked for, one per resample (NaN: undefined)."""
        return self._kept[(id(sink), name)]

    def on_done(self, callback: Callable[[], None]) -> None:
        """Call `callback()` after `run()` has filled every sink (to derive figures from
        the intervals)."""
        self._done.append(callback)

    def add(
        self,
        items: ArrayLike,
        features: ArrayLike | sparse.spmatrix,
        fn: StatFn,
        *,
        sink: Sink,
        key: str,
        single: bool = False,
    ) -> None:
        """Register a statistic: `features` has one row per entry of `items` (the item the
        row belongs to, one of the resampled items); `fn` maps summed features to named
        values."""
        from scipy import sparse

        items = np.asarray(items)
        rows = np.minimum(np.searchsorted(self.keys, items), max(self.keys.size - 1, 0))
        feats: sparse.spmatrix = (
            features if sparse.issparse(features) else sparse.coo_matrix(features)
        )
        if feats.shape[0] != rows.size:
            raise ValueError("one item per feature row")
        if rows.size and (self.keys.size == 0 or not np.array_equal(self.keys[rows], items)):
            raise ValueError("a feature row belongs to an item outside the resampled items")
        coo = feats.tocoo()
        summed = sparse.csr_matrix(
            (coo.data, (rows[coo.row], coo.col)), shape=(self.keys.size, feats.shape[1])
        )
        # items x features summed per item; its transpose is the features x items CSC the
        # products take (no copy)
        drawn = (
            int(np.count_nonzero(np.bincount(rows, minlength=self.keys.size))) if rows.size else 0
        )
        self._stats.append(_Registered(summed.T, fn, sink, key, single, drawn))

    def run(self, progress: Callable[[float], None] | None = None) -> None:
        """Compute every registered statistic's intervals into its sink, then call the
        `on_done` callbacks. `progress` gets the fraction of resamples done after each
        chunk."""
        estimates: list[dict[str, npt.NDArray[np.float64]]] = []
        boots: list[dict[str, list[npt.NDArray[np.float64]]]] = []
        for ft, fn, *_ in self._stats:
            estimates.append(fn(np.asarray(ft.sum(axis=1)).reshape(1, -1)))
            boots.append({name: [] for name in estimates[-1]})
        n = self.keys.size
        if self._stats and n >= 2 and self.resamples:
            products = self._products()
            rng = np.random.default_rng(self.seed)
            size = max(1, min(_RESAMPLES_PER_CHUNK, _CELLS_PER_CHUNK // n))
            drawn = 0
            for counts in _chunks(n, 0, self.resamples, rng, size=size):
                for (_, fn, *_), boot, sums in zip(
                    self._stats, boots, products(counts), strict=True
                ):
                    for name, v in fn(sums).items():
                        boot[name].append(v)
                drawn += counts.shape[0]
                if progress is not None:
                    progress(drawn / self.resamples)
        for (_, _, sink, key, single, items), est, boot in zip(
            self._stats, estimates, boots, strict=True
        ):
            out: dict[str, IntervalDict] = {}
            for name, value in est.items():
                e = float(value[0])
                found = _interval(None if np.isnan(e) else e, _cat(boot[name]), items)
                out[name] = found.as_dict()
            sink[key] = next(iter(out.values())) if single else out
            for name in boot:
                if (id(sink), name) in self._keep:
                    self._kept[(id(sink), name)] = _cat(boot[name])
            if self.keep:
                self.values[key] = {name: _cat(parts) for name, parts in boot.items()}
        for callback in self._done:
            callback()

    def _products(
        self,
    ) -> Callable[[npt.NDArray[np.float64]], Iterator[npt.NDArray[np.float64]]]:
        """A function from a chunk of resamples (resamples x items counts) to each
        statistic's summed features (resamples x features).

        Narrow statistics (at most _NARROW features: sums over units, small joint tables)
        are multiplied together in one dense matrix product (BLAS reads the counts once for
        all of them). Wide ones (one joint table per annotator pair or per annotator,
        mostly empty) are sparse products taken item by item (CSC: the counts are read in
        order, the small output is what is written at random), in float32 when their
        whole-number sums are exact in it (half the memory traffic). The sums are made one
        statistic at a time, as the caller takes them: with many judges the wide sums of a
        chunk held together took gigabytes."""
        n = self.keys.size
        # per statistic: its columns of the dense product, or its sparse features and
        # whether they are taken in float32
        narrow: list[npt.NDArray[np.float64]] = []
        layout: list[slice | tuple[sparse.csc_matrix, bool]] = []
        offset = 0
        for ft, *_ in self._stats:
            d = ft.shape[0]
            if d <= _NARROW and n * (offset + d) <= _DENSE_CELLS:
                narrow.append(ft.T.toarray())
                layout.append(slice(offset, offset + d))
                offset += d
            else:
                single = _exact_in_float32(ft, n)
                layout.append(((ft.astype(np.float32) if single else ft).tocsc(), single))
        dense = np.hstack(narrow) if narrow else None

        def products(counts: npt.NDArray[np.float64]) -> Iterator[npt.NDArray[np.float64]]:
            together = counts @ dense if dense is not None else None
            drawn: npt.NDArray[np.float64] | None = None
            drawn32: npt.NDArray[np.float32] | None = None
            for how in layout:
                if isinstance(how, slice):
                    assert together is not None  # a slice is laid out only with `dense`
                    yield together[:, how]
                    continue
                if drawn is None:
                    drawn = np.ascontiguousarray(counts.T)
                    drawn32 = drawn.astype(np.float32)
                ft, single = how
                x = drawn32 if single else drawn
                yield (ft @ x).T.astype(np.float64, copy=False)

        return products


def _exact_in_float32(ft: sparse.csr_matrix, n_items: int) -> bool:
    """Whole-number features whose resampled sums (at most n_items times the largest item
    sum) stay below 2**24: float32 holds them and their sums exactly."""
    data = ft.data
    return bool(
        data.size and np.all(data == np.round(data)) and np.abs(data).max() * n_items < 2**24
    )


def tau_b_tables(
    tables: ArrayLike,
    margins: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None,
) -> npt.NDArray[np.float64]:
    """Kendall's tau-b per joint table (rows x nx x ny of counts over the sorted distinct
    x and y values): S = concordant less discordant pairs,
    tau_b = S / sqrt((n0 - n1)(n0 - n2)) with n0 = n(n-1)/2 and n1, n2 the pairs tied on x
    and on y (Kendall 1945; what scipy's variant "b" computes). `margins`: the tables'
    (sums over y, sums over x), when known.

    S in two running sums over the table: with below[i, j] the counts of x values after i
    in column j, and c its running sum over j, a cell's pairs with the rows below it are
    concordant to the right and discordant to the left, so
    S = sum_i rows_i * below_total_i + sum t * below - 2 sum t * c. Every term is a whole
    number of pairs (exact in float64 for any table under 2**26 pairs), so S is the same
    integer as concordant - discordant counted apart (the figures do not move), at about
    a third of the passes over the table (the wide metric tables of a report's intervals
    spend most of their resamples here)."""
    t = np.asarray(tables, dtype=np.float64)
    rows, cols = (t.sum(axis=2), t.sum(axis=1)) if margins is None else margins
    below = np.cumsum(t, axis=1)
    np.subtract(cols[:, None, :], below, out=below)  # sum of t[i' > i, j]
    below_total = below.sum(axis=2)
    s = (rows * below_total).sum(axis=1) + np.einsum("rij,rij->r", t, below)
    np.cumsum(below, axis=2, out=below)  # sum of t[i' > i, j' <= j]
    s -= 2 * np.einsum("rij,rij->r", t, below)
    return tau_b_from(s, rows, cols)


def tau_b_from(
    s: npt.NDArray[np.float64], rows: npt.NDArray[np.float64], cols: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Kendall's tau-b per table from S (concordant less discordant pairs, a whole number)
    and the table's margins (`rows`: sums over y, `cols`: sums over x), as `tau_b_tables`."""
    n = rows.sum(axis=1)
    n0 = n * (n - 1) / 2
    n1 = (rows * (rows - 1) / 2).sum(axis=1)
    n2 = (cols * (cols - 1) / 2).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = s / np.sqrt((n0 - n1) * (n0 - n2))
    tau[(n0 - n1 <= 0) | (n0 - n2 <= 0)] = np.nan
    return np.asarray(tau, dtype=np.float64)
