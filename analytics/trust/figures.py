"""The judge trust report's calibration, strata, N/A and stochasticity figures
(docs/JUDGE_TRUST.md), per judge and skill, from report rows and the extra inputs
analytics.trust_inputs reads. Pure (no Django).

Units are responses, as in the report: a response's human consensus on a skill is the mean
of its human scores (N/A left out; analytics.report.build.human_means), a judge's value is
the mean of its samples (analytics.rows.Row). Every interval resamples items (the report's
`resamples`, analytics.bootstrap.Resampler): one Resampler per skill, over every item any
of that skill's figures reads, so a skill's figures are computed on the same resamples.

Rounding to the 1-5 scale is half up (2.5 -> 3: floor(x + 0.5)), clipped to 1..5.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from analytics import bootstrap, metrics
from analytics.report import resampled, small_samples
from analytics.rows import Row

Json = dict[str, Any]
FloatArray = npt.NDArray[np.float64]

SCALE = (1, 2, 3, 4, 5)
NA = "N/A"
#: Bland-Altman's limits of agreement: bias +/- LOA_Z standard deviations (Bland & Altman 1986).
LOA_Z = 1.96
#: The isotonic map is cross-validated over this many folds of items (fewer with fewer items).
FOLDS = 5
FOLD_SEED = 0
#: The Bland-Altman chart's points (distinct (mean, difference) pairs with their counts)
#: are kept up to this many; the figures themselves use every response.
MAX_POINTS = 2000
ALPHA_KEPT = ("ordinal", "interval")

#: (response id, item id, skill, sample index, score or None for N/A): one judge sample.
SampleRow = tuple[int, int, str, int, float | None]
#: (response id, item id, skill, first score, repeat score), None for N/A: a hidden repeat.
RetestRow = tuple[int, int, str, float | None, float | None]


@dataclass(frozen=True)
class TrustInputs:
    """What the trust figures read besides the report rows: each response's length in words,
    each judge's per-sample scores (only judges with k > 1 samples), and the people's
    test-retest pairs from hidden repeats."""

    words: Mapping[int, int] = field(default_factory=dict)
    samples: Mapping[str, Sequence[SampleRow]] = field(default_factory=dict)
    retest: Sequence[RetestRow] = ()


# --- small pure pieces (each tested against a hand-computed example) ---------------------------


def round_scale(values: npt.ArrayLike) -> FloatArray:
    """Half-up rounding onto the 1-5 scale: floor(x + 0.5), clipped to 1..5."""
    return np.clip(np.floor(np.asarray(values, dtype=np.float64) + 0.5), 1, 5)


def bland_altman(human: npt.ArrayLike, judge: npt.ArrayLike) -> Json:
    """Bias (mean of judge - human), the sample standard deviation of the differences and
    the 95% limits of agreement bias +/- 1.96 SD (Bland & Altman 1986, Lancet 327:307-310)."""
    d = np.asarray(judge, dtype=np.float64) - np.asarray(human, dtype=np.float64)
    n = int(d.size)
    if n == 0:
        return {"n": 0, "bias": None, "sd": None, "loa_low": None, "loa_high": None}
    bias = float(d.mean())
    sd = float(d.std(ddof=1)) if n >= 2 else None
    return {
        "n": n,
        "bias": bias,
        "sd": sd,
        "loa_low": None if sd is None else bias - LOA_Z * sd,
        "loa_high": None if sd is None else bias + LOA_Z * sd,
    }


def isotonic_map(x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """The monotone (non-decreasing) least-squares map from judge values `x` to human values
    `y`: at each distinct x, the isotonic regression (scipy.optimize.isotonic_regression) of
    the mean y there, weighted by how many pairs share that x. Returns (distinct x, fitted
    value at each)."""
    xs, inverse, counts = np.unique(
        np.asarray(x, dtype=np.float64), return_inverse=True, return_counts=True
    )
    sums = np.bincount(inverse, weights=np.asarray(y, dtype=np.float64), minlength=xs.size)
    if xs.size == 0:
        return xs, xs.copy()
    # scipy is imported where used: at module top it added ~0.5 s of CPU to every process start
    from scipy.optimize import isotonic_regression

    fitted = isotonic_regression(sums / counts, weights=counts.astype(np.float64), increasing=True)
    return xs, np.asarray(fitted.x, dtype=np.float64)


def map_apply(xs: npt.ArrayLike, ys: npt.ArrayLike, values: npt.ArrayLike) -> FloatArray:
    """A fitted map at `values`: linear between the fitted points, constant beyond the ends
    (numpy.interp)."""
    return np.interp(
        np.asarray(values, dtype=np.float64),
        np.asarray(xs, dtype=np.float64),
        np.asarray(ys, dtype=np.float64),
    )


def item_folds(
    items: npt.ArrayLike, folds: int = FOLDS, seed: int = FOLD_SEED
) -> npt.NDArray[np.intp]:
    """Each unit's fold: the distinct items in a fixed pseudo-random order
    (numpy default_rng(seed)), dealt out to `folds` folds in turn, so that a response is
    never predicted by a map fitted on another response of its item."""
    keys, inverse = np.unique(np.asarray(items), return_inverse=True)
    order = np.random.default_rng(seed).permutation(keys.size)
    fold_of_key = np.empty(keys.size, dtype=np.intp)
    fold_of_key[order] = np.arange(keys.size) % max(1, folds)
    return fold_of_key[inverse]


def cross_validated_map(
    human: npt.ArrayLike, judge: npt.ArrayLike, items: npt.ArrayLike, folds: int = FOLDS
) -> FloatArray | None:
    """Out-of-fold calibrated values: each fold's responses mapped by the isotonic map fitted
    on the other folds (`item_folds`). None with fewer than two items."""
    h, j = np.asarray(human, dtype=np.float64), np.asarray(judge, dtype=np.float64)
    n_items = np.unique(np.asarray(items)).size
    if n_items < 2:
        return None
    k = min(folds, n_items)
    fold = item_folds(items, k)
    out = np.empty(h.size)
    for f in range(k):
        test = fold == f
        xs, ys = isotonic_map(j[~test], h[~test])
        out[test] = map_apply(xs, ys, j[test])
    return out


def confusion(human: Sequence[float | None], judge: Sequence[float | None]) -> Json:
    """Judge (rows) against human consensus (columns), each rounded onto the scale
    (`round_scale`) or N/A: a 6 x 6 table of counts, labels 1..5 and N/A."""
    labels: list[int | str] = [*SCALE, NA]

    def codes(values: Sequence[float | None]) -> npt.NDArray[np.intp]:
        v = np.array([np.nan if x is None else x for x in values], dtype=np.float64)
        out = np.full(v.size, 5, dtype=np.intp)
        known = ~np.isnan(v)
        out[known] = round_scale(v[known]).astype(np.intp) - 1
        return out

    table = np.zeros((6, 6), dtype=np.int64)
    np.add.at(table, (codes(judge), codes(human)), 1)
    return {
        "labels": labels,
        "rows": "judge",
        "columns": "human consensus",
        "counts": table.tolist(),
    }


def terciles(values: npt.ArrayLike) -> tuple[FloatArray, npt.NDArray[np.intp]]:
    """The tercile cut points (numpy.quantile at 1/3 and 2/3, linear interpolation) and each
    value's tercile: 0 at or below the first cut, 1 up to the second, 2 above it. Ties
    stay together, so terciles may be uneven (or empty) when values repeat."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return np.array([np.nan, np.nan]), np.zeros(0, dtype=np.intp)
    cuts = np.quantile(v, [1 / 3, 2 / 3])
    group = np.where(v <= cuts[0], 0, np.where(v <= cuts[1], 1, 2)).astype(np.intp)
    return cuts, group


def human_spread(rows: Iterable[Row]) -> dict[int, float]:
    """response id -> the population standard deviation (ddof 0) of its human scores on
    the skill (N/A left out), for responses with at least two scores: 0 when the people
    agree exactly, 2 at most on the 1-5 scale."""
    scores: dict[int, list[float]] = defaultdict(list)
    for rid, _item, _system, _skill, _rater, value in rows:
        if value is not None:
            scores[rid].append(float(value))
    out: dict[int, float] = {}
    for rid, v in scores.items():
        if len(v) >= 2:
            mean = sum(v) / len(v)
            out[rid] = math.sqrt(sum((x - mean) ** 2 for x in v) / len(v))
    return out


def applies_majority(rows: Iterable[Row]) -> dict[int, bool]:
    """response id -> whether the skill applies by the people's majority: False when more
    than half of its human scores are N/A, True otherwise (a tie counts as applies)."""
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for rid, _item, _system, _skill, _rater, value in rows:
        counts[rid][value is None] += 1
    return {rid: na <= scored for rid, (scored, na) in counts.items()}


def _clean(value: object) -> object:
    """JSON-safe: NaN and infinities become None; numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _f(value: float | np.floating[Any] | None) -> float | None:
    if value is None:
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def _share(sums: FloatArray, num: int, den: int) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(sums[:, num] / sums[:, den], dtype=np.float64)


# --- per skill --------------------------------------------------------------------------------


@dataclass
class _Pairs:
    """A judge's responses with a human consensus on one skill (both numeric)."""

    rids: npt.NDArray[np.int64]
    items: npt.NDArray[np.int64]
    h: FloatArray
    j: FloatArray


def _pairs(means: Mapping[int, tuple[int, float]], judge: Mapping[int, float | None]) -> _Pairs:
    shared = sorted(rid for rid, v in judge.items() if v is not None and rid in means)
    return _Pairs(
        np.array(shared, dtype=np.int64),
        np.array([means[r][0] for r in shared], dtype=np.int64),
        np.array([means[r][1] for r in shared], dtype=np.float64),
        np.array([judge[r] for r in shared], dtype=np.float64),
    )


def _calibration(
    p: _Pairs,
    human_na: Mapping[int, bool],
    judge: Mapping[int, float | None],
    means: Mapping[int, tuple[int, float]],
    rs: bootstrap.Resampler | None,
) -> Json:
    result: Json = {"n": int(p.h.size)}
    ba = bland_altman(p.h, p.j)
    result["offset"] = {"estimate": ba["bias"]}
    result["bland_altman"] = ba
    diff = p.j - p.h
    mean = (p.j + p.h) / 2
    points: dict[tuple[float, float], int] = defaultdict(int)
    for m, d in zip(np.round(mean, 3).tolist(), np.round(diff, 3).tolist(), strict=True):
        points[(m, d)] += 1
    result["bland_altman"]["points"] = [[m, d, c] for (m, d), c in sorted(points.items())][
        :MAX_POINTS
    ]
    result["bland_altman"]["points_total"] = len(points)
    # the confusion matrix: every response with human rows and a judge row on the skill
    both = sorted(rid for rid in judge if rid in human_na)
    result["confusion"] = confusion(
        [means[r][1] if r in means else None for r in both], [judge[r] for r in both]
    )
    rounded_h, rounded_j = round_scale(p.h), round_scale(p.j)
    exact_before = (rounded_h == rounded_j).astype(np.float64)
    abs_before = np.abs(diff)
    xs, ys = isotonic_map(p.j, p.h)
    result["map"] = [[float(x), float(y)] for x, y in zip(xs, ys, strict=True)]
    predicted = cross_validated_map(p.h, p.j, p.items)
    iso: Json = {
        "folds": min(FOLDS, int(np.unique(p.items).size)),
        "by": "item",
        "mae_before": _f(abs_before.mean()) if p.h.size else None,
        "exact_before": _f(exact_before.mean()) if p.h.size else None,
    }
    if predicted is not None:
        abs_after = np.abs(predicted - p.h)
        exact_after = (round_scale(predicted) == rounded_h).astype(np.float64)
        iso["mae_after"] = _f(abs_after.mean())
        iso["exact_after"] = _f(exact_after.mean())
    else:
        abs_after = exact_after = np.full(p.h.size, np.nan)
        iso["mae_after"] = iso["exact_after"] = None
    result["isotonic"] = iso
    if rs is not None and p.h.size:
        ones = np.ones(p.h.size)
        cv = predicted is not None
        features = np.column_stack(
            [
                ones,
                diff,
                diff * diff,
                abs_before,
                exact_before,
                abs_after if cv else np.zeros(p.h.size),
                exact_after if cv else np.zeros(p.h.size),
            ]
        )

        def fn(s: FloatArray) -> dict[str, FloatArray]:
            n = s[:, 0]
            with np.errstate(divide="ignore", invalid="ignore"):
                bias = s[:, 1] / n
                var = (s[:, 2] - s[:, 1] ** 2 / n) / (n - 1)
            sd = np.sqrt(np.where(var < 0, 0.0, var))
            sd[n < 2] = np.nan
            out = {
                "bias": bias,
                "sd": sd,
                "loa_low": bias - LOA_Z * sd,
                "loa_high": bias + LOA_Z * sd,
                "mae_before": _share(s, 3, 0),
                "exact_before": _share(s, 4, 0),
            }
            if cv:
                out["mae_after"] = _share(s, 5, 0)
                out["exact_after"] = _share(s, 6, 0)
                out["mae_gain"] = _share(s, 3, 0) - _share(s, 5, 0)
            return out

        found: Json = {}
        rs.add(p.items, features, fn, sink=found, key="ci")

        def done() -> None:
            ci = found["ci"]
            result["offset"] = ci["bias"]
            result["bland_altman"]["ci"] = {k: ci[k] for k in ("bias", "sd", "loa_low", "loa_high")}
            result["isotonic"]["ci"] = {
                k: v for k, v in ci.items() if k not in ("bias", "sd", "loa_low", "loa_high")
            }

        rs.on_done(done)
    return result


def _quality(
    h: FloatArray,
    j: FloatArray,
    items: npt.ArrayLike,
    rs: bootstrap.Resampler | None,
    on_scale: bool,
    out: Json | None = None,
) -> Json:
    """Pearson, Spearman and MAE of the responses given, with their n and items (in `out`,
    which the intervals fill when the resampler runs)."""
    c = metrics.correlate(h, j)
    out = {} if out is None else out
    out |= {
        "n": int(h.size),
        "items": int(np.unique(items).size),
        "pearson": c.pearson,
        "spearman": c.spearman,
        "mae": c.mae if on_scale else None,
    }
    if rs is not None and h.size:
        _quality_register(rs, h, j, items, sink=out, on_scale=on_scale)
    return out


def _quality_register(
    rs: bootstrap.Resampler,
    h: FloatArray,
    j: FloatArray,
    items: npt.ArrayLike,
    *,
    sink: Json,
    on_scale: bool,
) -> None:
    """Intervals of Pearson and MAE (in `sink["ci"]`) from sums over responses: n, the
    centred values, their squares and cross product, and |h - j| (Pearson is unchanged by
    the centring, which keeps the sums well conditioned). Spearman has no interval here: its
    ranks need each group's joint table of values, which made the strata cost more than the
    rest of the report; its point estimate stays."""
    x = h - h.mean()
    y = j - j.mean()
    features = np.column_stack([np.ones(x.size), x, y, x * x, y * y, x * y, np.abs(h - j)])

    def fn(s: FloatArray) -> dict[str, FloatArray]:
        n = s[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            sxx = s[:, 3] - s[:, 1] ** 2 / n
            syy = s[:, 4] - s[:, 2] ** 2 / n
            sxy = s[:, 5] - s[:, 1] * s[:, 2] / n
            pearson = sxy / np.sqrt(sxx * syy)
        scale = np.maximum(s[:, 3], 1.0) * np.maximum(s[:, 4], 1.0)
        pearson[(n < 2) | (sxx * syy <= 1e-12 * scale)] = np.nan
        out = {"pearson": np.clip(pearson, -1.0, 1.0)}
        if on_scale:
            out["mae"] = _share(s, 6, 0)
        return out

    rs.add(items, features, fn, sink=sink, key="ci")


def _groups(
    p: _Pairs,
    labels: Sequence[str],
    member: Callable[[int], Iterable[str]],
    rs: bootstrap.Resampler | None,
    on_scale: bool,
) -> list[Json]:
    rows: dict[str, list[int]] = {label: [] for label in labels}
    for k, rid in enumerate(p.rids.tolist()):
        for label in member(rid):
            if label in rows:
                rows[label].append(k)
    out = []
    for label in labels:
        idx = np.array(rows[label], dtype=np.intp)
        out.append(_quality(p.h[idx], p.j[idx], p.items[idx], rs, on_scale, {"group": label}))
    return out


def _tercile_strata(
    p: _Pairs, value_of: Mapping[int, float], rs: bootstrap.Resampler | None, on_scale: bool
) -> Json:
    known = [rid for rid in p.rids.tolist() if rid in value_of]
    values = np.array([value_of[r] for r in known], dtype=np.float64)
    cuts, group = terciles(values)
    tercile = dict(zip(known, group.tolist(), strict=True))
    labels = ("low", "middle", "high")
    groups = _groups(
        p, labels, lambda rid: [labels[tercile[rid]]] if rid in tercile else [], rs, on_scale
    )
    for k, g in enumerate(groups):
        inside = values[group == k]
        g["range"] = [_f(inside.min()), _f(inside.max())] if inside.size else None
    return {"cuts": [_f(c) for c in cuts], "responses": len(known), "groups": groups}


def _na(
    human_rows: Sequence[Row],
    judge: Mapping[int, float | None],
    items_of: Mapping[int, int],
    rs: bootstrap.Resampler | None,
    majority: Mapping[int, bool] | None = None,
) -> Json:
    human_na = sum(1 for r in human_rows if r[5] is None)
    judge_na = sum(1 for v in judge.values() if v is None)
    majority = applies_majority(human_rows) if majority is None else majority
    both = sorted(rid for rid in judge if rid in majority)
    people = np.array([1.0 if majority[r] else 0.0 for r in both])
    model = np.array([0.0 if judge[r] is None else 1.0 for r in both])
    table = [[int(np.sum((model == a) & (people == b))) for b in (1.0, 0.0)] for a in (1.0, 0.0)]
    out: Json = {
        "people_rate": _f(human_na / len(human_rows)) if human_rows else None,
        "people_scores": len(human_rows),
        "judge_rate": _f(judge_na / len(judge)) if judge else None,
        "judge_scores": len(judge),
        "responses": len(both),
        "agreement": _f(float(np.mean(people == model))) if both else None,
        # rows: the judge (applies, N/A); columns: the people's majority (applies, N/A)
        "table": table,
        "kappa": metrics.cohen_kappa(model, people, "unweighted", categories=[0.0, 1.0])
        if both
        else None,
    }
    if rs is not None and both:
        found: Json = {}
        items = np.array([items_of[r] for r in both])
        resampled.cohen_register(rs, model, people, items, [0.0, 1.0], sink=found, key="ci")

        def done() -> None:
            out["kappa_ci"] = found["ci"]["unweighted"]

        rs.on_done(done)
    return out


def _retest_figures(
    first: FloatArray,
    second: FloatArray,
    items: npt.ArrayLike,
    same: FloatArray,
    rs: bootstrap.Resampler | None,
) -> Json:
    matrix = np.vstack([first, second])
    out: Json = {
        "pairs": int(first.size),
        "exact": _f(same.mean()) if same.size else None,
        "alpha": {level: metrics.krippendorff_alpha(matrix, level) for level in ALPHA_KEPT},
    }
    if rs is not None and first.size:
        found: Json = {}
        resampled.alpha_register(rs, matrix, items, sink=found, key="alpha")
        rs.add(
            items,
            np.column_stack([np.ones(same.size), same]),
            lambda s: {"exact": _share(s, 1, 0)},
            sink=found,
            key="exact",
            single=True,
        )

        def done() -> None:
            out["alpha_ci"] = {level: found["alpha"][level] for level in ALPHA_KEPT}
            out["exact_ci"] = found["exact"]

        rs.on_done(done)
    return out


def _judge_stochasticity(rows: Sequence[SampleRow], rs: bootstrap.Resampler | None) -> Json:
    """Samples as raters, responses as units: Krippendorff's alpha (krippendorff package,
    through analytics.metrics), and the share of responses whose samples all agree (N/A
    counts as a value)."""
    by_rid: dict[int, dict[int, float | None]] = defaultdict(dict)
    item_of: dict[int, int] = {}
    for rid, item, _skill, sample, value in rows:
        by_rid[rid][sample] = value
        item_of[rid] = item
    rids = sorted(r for r, s in by_rid.items() if len(s) >= 2)
    k = max((len(s) for s in by_rid.values()), default=0)
    samples = sorted({s for r in rids for s in by_rid[r]})
    matrix = np.full((len(samples), len(rids)), np.nan)
    where = {s: i for i, s in enumerate(samples)}
    same = np.zeros(len(rids))
    for u, rid in enumerate(rids):
        for s, v in by_rid[rid].items():
            if v is not None:
                matrix[where[s], u] = v
        same[u] = float(len(set(by_rid[rid].values())) == 1)
    items = np.array([item_of[r] for r in rids], dtype=np.int64)
    out: Json = {
        "responses": len(rids),
        "samples": k,
        "unanimous": _f(same.mean()) if rids else None,
        "alpha": {level: metrics.krippendorff_alpha(matrix, level) for level in ALPHA_KEPT}
        if rids
        else {level: None for level in ALPHA_KEPT},
    }
    if rs is not None and rids:
        found: Json = {}
        resampled.alpha_register(rs, matrix, items, sink=found, key="alpha")
        rs.add(
            items,
            np.column_stack([np.ones(same.size), same]),
            lambda s: {"unanimous": _share(s, 1, 0)},
            sink=found,
            key="unanimous",
            single=True,
        )

        def done() -> None:
            out["alpha_ci"] = {level: found["alpha"][level] for level in ALPHA_KEPT}
            out["unanimous_ci"] = found["unanimous"]

        rs.on_done(done)
    return out


def _people_retest(rows: Sequence[RetestRow], rs: bootstrap.Resampler | None) -> Json:
    """Each hidden repeat's score against the same annotator's first score: alpha over the
    (first, repeat) pairs as two raters, and exact agreement (N/A = N/A agrees, as on the
    campaign page)."""
    first = np.array([np.nan if r[3] is None else r[3] for r in rows], dtype=np.float64)
    second = np.array([np.nan if r[4] is None else r[4] for r in rows], dtype=np.float64)
    same = np.array([float(r[3] == r[4]) for r in rows], dtype=np.float64)
    items = np.array([r[1] for r in rows], dtype=np.int64)
    return _retest_figures(first, second, items, same, rs)


# --- the report's "trust" ---------------------------------------------------------------------


def trust_figures(
    human: Sequence[Row],
    judge: Sequence[Row],
    facets: Mapping[int, Mapping[str, Any]],
    inputs: TrustInputs,
    *,
    resamples: int = 0,
    off_scale: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset(),
    progress: Callable[[float], None] | None = None,
) -> dict[str, Json]:
    """judge name -> {"calibration", "strata", "na", "stochasticity"}, each keyed by skill
    (docs/JUDGE_TRUST.md). `off_scale` (judge, skill) pairs (values on a metric's own
    scale) get no calibration and no MAE."""
    human_by_skill: dict[str, list[Row]] = defaultdict(list)
    for row in human:
        human_by_skill[row[3]].append(row)
    judge_by: dict[str, dict[str, dict[int, float | None]]] = defaultdict(lambda: defaultdict(dict))
    items_of: dict[int, int] = {}
    for rid, item, _system, skill, name, value in judge:
        judge_by[name][skill][rid] = value
        items_of[rid] = item
    for row in human:
        items_of[row[0]] = row[1]
    samples_by: dict[str, dict[str, list[SampleRow]]] = {
        name: defaultdict(list) for name in inputs.samples
    }
    for name, rows in inputs.samples.items():
        for srow in rows:
            samples_by[name][srow[2]].append(srow)
    retest_by: dict[str, list[RetestRow]] = defaultdict(list)
    for rrow in inputs.retest:
        retest_by[rrow[2]].append(rrow)
    judges = sorted(judge_by)
    lengths = {r: float(w) for r, w in inputs.words.items()}
    result: dict[str, Json] = {
        name: {"calibration": {}, "strata": {}, "na": {}, "stochasticity": {}} for name in judges
    }
    skills = sorted(set(human_by_skill) | {s for by in judge_by.values() for s in by})
    for position, skill in enumerate(skills):
        hrows = human_by_skill.get(skill, [])
        sums: dict[int, list[float]] = defaultdict(lambda: [0.0, 0])
        for rid, _item, _system, _skill, _rater, value in hrows:
            if value is not None:
                acc = sums[rid]
                acc[0] += float(value)
                acc[1] += 1
        means = {rid: (items_of[rid], t / c) for rid, (t, c) in sums.items()}
        human_na = {row[0]: True for row in hrows}
        spread = human_spread(hrows)
        majority = applies_majority(hrows)
        universe = {items_of[r] for r in human_na}
        for name in judges:
            universe |= {items_of[r] for r in judge_by[name].get(skill, {})}
            universe |= {r[1] for r in samples_by.get(name, {}).get(skill, [])}
        universe |= {r[1] for r in retest_by.get(skill, [])}
        rs = (
            bootstrap.Resampler(sorted(universe), resamples=resamples)
            if resamples and universe
            else None
        )
        retest = _people_retest(retest_by[skill], rs) if retest_by.get(skill) else None
        for name in judges:
            scored = judge_by[name].get(skill)
            if not scored:
                continue
            on_scale = (name, skill) not in off_scale
            p = _pairs(means, scored)
            trust = result[name]
            trust["calibration"][skill] = (
                _calibration(p, human_na, scored, means, rs) if on_scale else {"off_scale": True}
            )
            domains = sorted(
                {d for i in set(p.items.tolist()) for d in facets.get(i, {}).get("domains", [])}
            )
            trust["strata"][skill] = {
                "all": _quality(p.h, p.j, p.items, rs, on_scale),
                "human_spread": _tercile_strata(p, spread, rs, on_scale),
                "length": _tercile_strata(p, lengths, rs, on_scale),
                "domain": _groups(
                    p,
                    domains,
                    lambda rid: facets.get(items_of[rid], {}).get("domains", []),
                    rs,
                    on_scale,
                ),
                "difficulty": _groups(
                    p,
                    [str(d) for d in SCALE],
                    lambda rid: [str(facets.get(items_of[rid], {}).get("difficulty"))],
                    rs,
                    on_scale,
                ),
            }
            trust["na"][skill] = _na(hrows, scored, items_of, rs, majority)
            own = samples_by.get(name, {}).get(skill)
            if own or retest is not None:
                trust["stochasticity"][skill] = {
                    "judge": _judge_stochasticity(own, rs) if own else None,
                    "people": retest,
                }
        if rs is not None:
            rs.run()
        if progress is not None:
            progress((position + 1) / len(skills))
    for figures in result.values():
        small_samples.flag_trust(figures)
    return {name: _clean_json(figures) for name, figures in result.items()}


def _clean_json(value: Json) -> Json:
    cleaned = _clean(value)
    assert isinstance(cleaned, dict)
    return cleaned
