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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

CONFIDENCE = 0.95
_CELLS_PER_CHUNK = 2_000_000  # floats held at once per chunk of resamples


@dataclass(frozen=True)
class Interval:
    estimate: float | None
    low: float | None
    high: float | None
    resamples: int  # resamples where the statistic was defined

    def as_dict(self) -> dict:
        return {"estimate": self.estimate, "low": self.low, "high": self.high,
                "resamples": self.resamples}  # fmt: skip


def _chunks(n_items: int, n_points: int, resamples: int, rng: np.random.Generator):
    """Resamples as rows of item counts: each row draws `n_items` items with replacement
    (multinomial counts), by drawing indices and counting them per row, which is much
    faster than numpy's multinomial with many categories."""
    size = max(1, min(resamples, _CELLS_PER_CHUNK // max(1, n_points + n_items)))
    done = 0
    while done < resamples:
        take = min(size, resamples - done)
        drawn = rng.integers(0, n_items, size=(take, n_items), dtype=np.int64)
        drawn += (np.arange(take, dtype=np.int64) * n_items)[:, None]
        counts = np.bincount(drawn.ravel(), minlength=take * n_items).reshape(take, n_items)
        yield counts.astype(float)
        done += take


def _interval(estimate, values: np.ndarray) -> Interval:
    values = values[np.isfinite(values)]
    if estimate is None or not np.isfinite(estimate) or values.size == 0:
        return Interval(None, None, None, int(values.size))
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return Interval(float(estimate), float(low), float(high), int(values.size))


def _codes(values) -> tuple[np.ndarray, np.ndarray]:
    distinct, code = np.unique(np.asarray(values, dtype=float), return_inverse=True)
    return distinct, code


def _joint(cluster: np.ndarray, n_items: int, cx, nx, cy, ny) -> sparse.csr_matrix:
    """Items x (x value, y value) counts: everything a resample's Pearson or Spearman needs."""
    cells = cx * ny + cy
    return sparse.csr_matrix((np.ones(cluster.size), (cluster, cells)), shape=(n_items, nx * ny))


def _stats_from_tables(tables: np.ndarray, vx: np.ndarray, vy: np.ndarray):
    """(Pearson, Spearman) per joint table (rows x nx x ny of counts)."""
    n = tables.sum(axis=(1, 2))
    tx, ty = tables.sum(axis=2), tables.sum(axis=1)
    rank_x = np.cumsum(tx, axis=1) - (tx - 1) / 2  # midrank of each distinct value
    rank_y = np.cumsum(ty, axis=1) - (ty - 1) / 2
    return (
        _pearson_table(
            tables, n, tx, ty, np.broadcast_to(vx, tx.shape), np.broadcast_to(vy, ty.shape)
        ),
        _pearson_table(tables, n, tx, ty, rank_x, rank_y),
    )


def _pearson_table(tables, n, tx, ty, sx_vals, sy_vals) -> np.ndarray:
    sx, sy = (tx * sx_vals).sum(axis=1), (ty * sy_vals).sum(axis=1)
    sxx, syy = (tx * sx_vals**2).sum(axis=1), (ty * sy_vals**2).sum(axis=1)
    sxy = np.einsum("rij,ri,rj->r", tables, sx_vals, sy_vals)
    cov = sxy - sx * sy / n
    vx, vy = sxx - sx * sx / n, syy - sy * sy / n
    with np.errstate(divide="ignore", invalid="ignore"):
        r = cov / np.sqrt(vx * vy)
    r[(vx <= 1e-12 * np.maximum(sxx, 1)) | (vy <= 1e-12 * np.maximum(syy, 1))] = np.nan
    return r


def correlation_intervals(
    x, y, items, *, resamples: int = 1000, seed: int = 0
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
    boot_p, boot_s = [], []
    if n_items >= 2:
        rng = np.random.default_rng(seed)
        jt = joint.T.tocsr()
        for counts in _chunks(n_items, vx.size * vy.size, resamples, rng):
            tables = (jt @ counts.T).T.reshape(-1, vx.size, vy.size)
            p, s = _stats_from_tables(tables, vx, vy)
            boot_p.append(p)
            boot_s.append(s)
    return {
        "pearson": _interval(None if np.isnan(pearson) else pearson, _cat(boot_p)),
        "spearman": _interval(None if np.isnan(spearman) else spearman, _cat(boot_s)),
    }


def _cat(parts: list) -> np.ndarray:
    return np.concatenate(parts) if parts else np.array([])


# --- Krippendorff's alpha from coincidence matrices -------------------------------------------


def _coincidences(matrix: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(units x V x V) coincidence contributions of each unit (column of `matrix`)."""
    counts = np.stack([np.sum(matrix == v, axis=0) for v in values], axis=1).astype(float)
    m = counts.sum(axis=1)
    keep = m >= 2
    counts, m = counts[keep], m[keep]
    outer = counts[:, :, None] * counts[:, None, :]
    outer[:, np.arange(values.size), np.arange(values.size)] -= counts
    return outer / (m - 1)[:, None, None], keep


def _delta2(level: str, values: np.ndarray, n_c: np.ndarray) -> np.ndarray:
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
    return (span - (n_c[:, :, None] + n_c[:, None, :]) / 2) ** 2


def _alpha_from(o: np.ndarray, level: str, values: np.ndarray) -> np.ndarray:
    """Alpha per row of pooled coincidence matrices `o` (rows x V x V)."""
    n_c = o.sum(axis=2)
    n = n_c.sum(axis=1)
    d2 = _delta2(level, values, n_c)
    observed = (o * d2).sum(axis=(1, 2))
    expected = (n_c[:, :, None] * n_c[:, None, :] * d2).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1 - (n - 1) * observed / expected
    alpha[expected <= 0] = np.nan
    return alpha


def alpha_intervals(
    matrix, unit_items, *, levels=("nominal", "ordinal", "interval", "ratio"),
    resamples: int = 1000, seed: int = 0,
) -> dict[str, Interval]:  # fmt: skip
    """Krippendorff's alpha (raters x units matrix, NaN = missing) per level, with
    percentile intervals from resampling items (`unit_items`: each unit's item)."""
    data = np.asarray(matrix, dtype=float)
    values = np.unique(data[~np.isnan(data)])
    if values.size < 2:
        return {level: Interval(None, None, None, 0) for level in levels}
    per_unit, keep = _coincidences(data, values)
    _, cluster = np.unique(np.asarray(unit_items)[keep], return_inverse=True)
    n_items = int(cluster.max()) + 1 if cluster.size else 0
    per_item = np.zeros((n_items, values.size, values.size))
    np.add.at(per_item, cluster, per_unit)
    flat = per_item.reshape(n_items, -1)
    pooled = flat.sum(axis=0).reshape(1, values.size, values.size)
    out: dict[str, list] = {level: [] for level in levels}
    if n_items >= 2:
        rng = np.random.default_rng(seed)
        for counts in _chunks(n_items, flat.shape[1], resamples, rng):
            o = (counts @ flat).reshape(-1, values.size, values.size)
            for level in levels:
                out[level].append(_alpha_from(o, level, values))
    result = {}
    for level in levels:
        estimate = _alpha_from(pooled, level, values)[0]
        boot = np.concatenate(out[level]) if out[level] else np.array([])
        result[level] = _interval(None if np.isnan(estimate) else estimate, boot)
    return result


def paired_difference(
    human, judge_a, judge_b, items, *, resamples: int = 1000, seed: int = 0
) -> dict:
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
    ja = _joint(cluster, n_items, ch, vh.size, ca, va.size)
    jb = _joint(cluster, n_items, ch, vh.size, cb, vb.size)

    def diff(ta, tb):
        return _stats_from_tables(ta, vh, va)[0] - _stats_from_tables(tb, vh, vb)[0]

    full_a = np.asarray(ja.sum(axis=0)).reshape(1, vh.size, va.size)
    full_b = np.asarray(jb.sum(axis=0)).reshape(1, vh.size, vb.size)
    estimate = float(diff(full_a, full_b)[0])
    boot = []
    if n_items >= 2:
        rng = np.random.default_rng(seed)
        jat, jbt = ja.T.tocsr(), jb.T.tocsr()
        for counts in _chunks(n_items, vh.size * max(va.size, vb.size), resamples, rng):
            ta = (jat @ counts.T).T.reshape(-1, vh.size, va.size)
            tb = (jbt @ counts.T).T.reshape(-1, vh.size, vb.size)
            boot.append(diff(ta, tb))
    values = _cat(boot)
    interval = _interval(None if np.isnan(estimate) else estimate, values)
    finite = values[np.isfinite(values)]
    p = float(np.mean(finite <= 0)) if finite.size else None
    return {**interval.as_dict(), "p_value_a_not_better": p}
